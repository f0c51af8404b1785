/* read(2) of one block from the start of a cached tmpfs file: file position and page cache copy. */
#include "fileio.h"

static void run(struct micro_task *t)
{
	char buf[FILEIO_BLOCK];
	int fd = fileio_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, lseek(fd, 0, SEEK_SET) < 0, "lseek");
		MICRO_FAIL_ON(t, read(fd, buf, sizeof(buf)) != sizeof(buf), "read");
		micro_count(t);
	}
}

FILEIO_TESTS(read, "lseek to 0 and read 4 KB", run);
