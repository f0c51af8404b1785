/* pread(2) of one block: no file position, so only the inode and page cache are shared. */
#include "fileio.h"

static void run(struct micro_task *t)
{
	char buf[FILEIO_BLOCK];
	int fd = fileio_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, pread(fd, buf, sizeof(buf), 0) != sizeof(buf), "pread");
		micro_count(t);
	}
}

FILEIO_TESTS(pread, "pread 4 KB at offset 0", run);
