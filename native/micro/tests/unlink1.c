#include "unlink.h"

static int init(struct micro_task *t)
{
	return dirs_init(t, DIRS_PRIVATE_DIR);
}

MICRO_TEST(unlink1, .description = "create and unlink a file in a directory private to the task",
	   .init = init, .run = unlink_run);
