/* pwrite(2) of one block over existing data: the inode lock without file position traffic. */
#include "fileio.h"

static void run(struct micro_task *t)
{
	char buf[FILEIO_BLOCK] = { 0 };
	int fd = fileio_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf), "pwrite");
		micro_count(t);
	}
}

FILEIO_TESTS(pwrite, "pwrite 4 KB at offset 0", run);
