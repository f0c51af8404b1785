/* Every task opens the same file: its dentry's reference count is the paper's section 4.4 hot line. */
#include "open.h"

static int init(struct micro_task *t)
{
	return open_init(t, DIRS_SHARED_FILE);
}

MICRO_TEST(open3, .description = "open/close of one file shared by all tasks (one dentry)",
	   .prepare = dirs_prepare, .init = init, .run = open_run);
