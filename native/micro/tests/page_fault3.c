/* Shared file mapping write faults: page cache, dirty tracking, the file's i_mmap rmap tree. */
#include "pagefault.h"

static int init(struct micro_task *t)
{
	return pagefault_file_init(t, MAP_SHARED);
}

MICRO_TEST(page_fault3, .description = "write faults on a shared mapping of a per-task tmpfs file",
	   .init = init, .run = pagefault_run);
