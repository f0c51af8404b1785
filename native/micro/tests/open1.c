#include "open.h"

static int init(struct micro_task *t)
{
	return open_init(t, DIRS_PRIVATE_DIR);
}

MICRO_TEST(open1, .description = "open/close of a file in a directory private to the task", .init = init,
	   .run = open_run);
