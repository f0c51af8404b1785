/* write(2) of one block over existing data: inode lock (i_rwsem) and timestamp updates per call. */
#include "fileio.h"

static void run(struct micro_task *t)
{
	char buf[FILEIO_BLOCK] = { 0 };
	int fd = fileio_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, lseek(fd, 0, SEEK_SET) < 0, "lseek");
		MICRO_FAIL_ON(t, write(fd, buf, sizeof(buf)) != sizeof(buf), "write");
		micro_count(t);
	}
}

FILEIO_TESTS(write, "lseek to 0 and write 4 KB", run);
