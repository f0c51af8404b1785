/* open(2) and close(2) of an existing file: path lookup, file allocation, the dentry's reference. */
#include "path.h"

static void run(struct micro_task *t)
{
	const char *path = t->priv;
	for (;;) {
		int fd = open(path, O_RDWR);
		MICRO_FAIL_ON(t, fd < 0, "open");
		close(fd);
		micro_count(t);
	}
}

static int init_own_file(struct micro_task *t)
{
	return path_init_existing(t, PATH_OWN_FILE);
}

static int init_own_dir(struct micro_task *t)
{
	return path_init_existing(t, PATH_OWN_DIR);
}

static int init_same_file(struct micro_task *t)
{
	return path_init_existing(t, PATH_SAME_FILE);
}

MICRO_TEST(open1, .description = "Separate file open/close", .init = init_own_file, .run = run);
MICRO_TEST(open2, .description = "Separate file open/close in different directories", .init = init_own_dir,
	   .run = run);
/* Every task opens the same file: its dentry's reference count is the paper's section 4.4 hot line. */
MICRO_TEST(open3, .description = "Same file open/close", .init = init_same_file, .run = run);
