/* Sequential write(2) of 4 KB blocks into the task's own file, back to the start every 1 MB. */
#include "file.h"

#define WRITE_FILE_SIZE (1UL << 20)

static void run(struct micro_task *t)
{
	char *buf = file_buf(t);
	int fd = file_fd(t);
	size_t written = 0;
	for (;;) {
		ssize_t n = write(fd, buf, FILE_BLOCK);
		MICRO_FAIL_ON(t, n < 0, "write");
		written += (size_t)n;
		if (written >= WRITE_FILE_SIZE) {
			written = 0;
			lseek(fd, 0, SEEK_SET);
		}
		micro_count(t);
	}
}

MICRO_TEST(write1, .description = "Separate file write", .init = file_init_private_empty, .run = run);
