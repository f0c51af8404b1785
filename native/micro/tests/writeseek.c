/* lseek then write(2) of one 4 KB block: the file position plus the inode lock and timestamps. */
#include "file.h"

static void run(struct micro_task *t)
{
	char *buf = file_buf(t);
	int fd = file_fd(t);
	off_t offset = file_offset(t);
	for (;;) {
		lseek(fd, offset, SEEK_SET);
		MICRO_FAIL_ON(t, write(fd, buf, FILE_BLOCK) != FILE_BLOCK, "write");
		micro_count(t);
	}
}


/* will-it-scale's writeseek2 calls itself "seek+read" by a slip of its source; it writes, and so do we. */
MICRO_TEST(writeseek1, .description = "Separate file seek+write", .init = file_init_private_empty,
	   .run = run);
MICRO_TEST(writeseek2, .description = "Same file seek+write to same offset", .prepare = file_prepare_block,
	   .init = file_init_shared_rdwr, .run = run);
MICRO_TEST(writeseek3, .description = "Same file seek+write to different offsets",
	   .prepare = file_prepare_per_task, .init = file_init_own_page_rdwr, .run = run);
