#include "unlink.h"

static int init(struct micro_task *t)
{
	return dirs_init(t, DIRS_SHARED_DIR);
}

MICRO_TEST(unlink2, .description = "create and unlink the task's own file in a directory shared by all",
	   .prepare = dirs_prepare, .init = init, .run = unlink_run);
