/* Create, close and unlink: the directory's i_rwsem for write twice per iteration, as Exim's spool does. */
#include "path.h"

static void run(struct micro_task *t)
{
	const char *path = t->priv;
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT, 0600);
		MICRO_FAIL_ON(t, fd < 0, "open(O_CREAT)");
		close(fd);
		MICRO_FAIL_ON(t, unlink(path), "unlink");
		micro_count(t);
	}
}

static int init_own_file(struct micro_task *t)
{
	return path_init(t, PATH_OWN_FILE);
}

static int init_own_dir(struct micro_task *t)
{
	return path_init(t, PATH_OWN_DIR);
}

MICRO_TEST(unlink1, .description = "Separate file open/close/unlink", .init = init_own_file, .run = run);
MICRO_TEST(unlink2, .description = "Separate file open/close/unlink in different directories",
	   .init = init_own_dir, .run = run);
