/*
 * fallocate(2) of the task's own file in 8 KB steps up to 1 MB, then truncated to zero: block
 * allocation and the inode lock. fallocate1 is on tmpfs (/dev/shm) whatever the file directory is,
 * fallocate2 in the file directory, as will-it-scale has them.
 */
#include "file.h"

#define FALLOCATE_SIZE (1L << 20)
#define FALLOCATE_STEP (FALLOCATE_SIZE / 128)

static int init_tmpfs(struct micro_task *t)
{
	int fd, err = micro_tmpfile("/dev/shm", 0, &fd);
	return err ? err : file_keep(t, fd);
}

static void run(struct micro_task *t)
{
	int fd = file_fd(t);
	off_t at = 0;
	for (;;) {
		if (fallocate(fd, 0, at, FALLOCATE_STEP))
			MICRO_FAIL_ON(t, errno != EINTR, "fallocate");
		at += FALLOCATE_STEP;
		if (at >= FALLOCATE_SIZE) {
			MICRO_FAIL_ON(t, ftruncate(fd, 0), "ftruncate");
			at = 0;
		}
		micro_count(t);
	}
}

MICRO_TEST(fallocate1, .description = "Separate file fallocate against tmpfs", .init = init_tmpfs, .run = run);
MICRO_TEST(fallocate2, .description = "Separate file fallocate", .init = file_init_private_empty, .run = run);
