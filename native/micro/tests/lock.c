/* fcntl(F_SETLKW) write lock and unlock of a file's first byte; each call counts, as in will-it-scale. */
#include "file.h"

static int set_lock(int fd, short type)
{
	struct flock lk = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	return fcntl(fd, F_SETLKW, &lk);
}

static void run(struct micro_task *t)
{
	int fd = file_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, set_lock(fd, F_WRLCK), "fcntl(F_WRLCK)");
		MICRO_FAIL_ON(t, set_lock(fd, F_UNLCK), "fcntl(F_UNLCK)");
		micro_add(t, 2);
	}
}

static int prepare_shared(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	return file_shared_make(workdir, 0);
}

MICRO_TEST(lock1, .description = "Separate file write lock/unlock", .init = file_init_private_empty, .run = run);
MICRO_TEST(lock2, .description = "Same file write lock/unlock", .prepare = prepare_shared,
	   .init = file_init_shared_rdwr, .run = run);
