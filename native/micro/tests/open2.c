#include "open.h"

static int init(struct micro_task *t)
{
	return open_init(t, DIRS_SHARED_DIR);
}

MICRO_TEST(open2, .description = "open/close of the task's own file in a directory shared by all tasks",
	   .prepare = dirs_prepare, .init = init, .run = open_run);
