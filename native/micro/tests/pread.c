/* pread(2) of one 4 KB block: no file position, so only the inode and the page cache are touched. */
#include "file.h"

static void run(struct micro_task *t)
{
	char *buf = file_buf(t);
	int fd = file_fd(t);
	off_t offset = file_offset(t);
	for (;;) {
		MICRO_FAIL_ON(t, pread(fd, buf, FILE_BLOCK, offset) != FILE_BLOCK, "pread");
		micro_count(t);
	}
}

MICRO_TEST(pread1, .description = "Separate file pread", .init = file_init_private_block,
	   .run = run);
MICRO_TEST(pread2, .description = "Same file pread to same offset", .prepare = file_prepare_block,
	   .init = file_init_shared_rdonly, .run = run);
MICRO_TEST(pread3, .description = "Same file pread to different offsets", .prepare = file_prepare_per_task,
	   .init = file_init_own_page_rdonly, .run = run);
