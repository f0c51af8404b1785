/*
 * lseek(SEEK_END): the call PostgreSQL makes many times per query (paper section 5.5), where the
 * 2.6.35 kernel took the inode mutex and collapsed at 36 cores.
 */
#include "fileio.h"

static void run(struct micro_task *t)
{
	int fd = fileio_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, lseek(fd, 0, SEEK_END) < 0, "lseek");
		micro_count(t);
	}
}

FILEIO_TESTS(lseek, "lseek(SEEK_END)", run);
