/* pwrite(2) of one 4 KB block: the inode lock and timestamps without file position traffic. */
#include "file.h"

static void run(struct micro_task *t)
{
	char *buf = file_buf(t);
	int fd = file_fd(t);
	off_t offset = file_offset(t);
	for (;;) {
		MICRO_FAIL_ON(t, pwrite(fd, buf, FILE_BLOCK, offset) != FILE_BLOCK, "pwrite");
		micro_count(t);
	}
}

MICRO_TEST(pwrite1, .description = "Separate file pwrite", .init = file_init_private_empty,
	   .run = run);
MICRO_TEST(pwrite2, .description = "Same file pwrite to same offset", .prepare = file_prepare_block,
	   .init = file_init_shared_rdwr, .run = run);
MICRO_TEST(pwrite3, .description = "Same file pwrite to different offsets", .prepare = file_prepare_per_task,
	   .init = file_init_own_page_rdwr, .run = run);
