/* lseek then read(2) of one 4 KB block: the file position (f_pos_lock when shared) and the page cache. */
#include "file.h"

static void run(struct micro_task *t)
{
	char *buf = file_buf(t);
	int fd = file_fd(t);
	off_t offset = file_offset(t);
	for (;;) {
		lseek(fd, offset, SEEK_SET);
		MICRO_FAIL_ON(t, read(fd, buf, FILE_BLOCK) != FILE_BLOCK, "read");
		micro_count(t);
	}
}

MICRO_TEST(readseek1, .description = "Separate file seek+read", .init = file_init_private_block,
	   .run = run);
MICRO_TEST(readseek2, .description = "Same file seek+read to same offset", .prepare = file_prepare_block,
	   .init = file_init_shared_rdwr, .run = run);
MICRO_TEST(readseek3, .description = "Same file seek+read to different offsets",
	   .prepare = file_prepare_per_task, .init = file_init_own_page_rdonly, .run = run);
