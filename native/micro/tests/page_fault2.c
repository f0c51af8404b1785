/* Copy-on-write faults on a private file mapping: page cache lookup plus a private copy. */
#include "pagefault.h"

static int init(struct micro_task *t)
{
	return pagefault_file_init(t, MAP_PRIVATE);
}

MICRO_TEST(page_fault2, .description = "write faults on a private mapping of a per-task tmpfs file (COW)",
	   .init = init, .run = pagefault_run);
