/*
 * lseek(2): will-it-scale's lseek1/2 seek to the start (SEEK_SET); lseek_end_shared is ours, the size
 * probe PostgreSQL makes many times per query (the paper's section 5.5), where Linux 2.6.35 took the
 * inode mutex for SEEK_END and collapsed at 36 cores.
 */
#include "file.h"

static void run_set(struct micro_task *t)
{
	int fd = file_fd(t);
	for (;;) {
		lseek(fd, 0, SEEK_SET);
		micro_count(t);
	}
}

static void run_end(struct micro_task *t)
{
	int fd = file_fd(t);
	for (;;) {
		MICRO_FAIL_ON(t, lseek(fd, 0, SEEK_END) < 0, "lseek");
		micro_count(t);
	}
}

MICRO_TEST(lseek1, .description = "Separate file lseek", .init = file_init_private_block, .run = run_set);
MICRO_TEST(lseek2, .description = "Same file lseek", .prepare = file_prepare_block,
	   .init = file_init_shared_rdwr, .run = run_set);
MICRO_TEST(lseek_end_shared, .description = "mosbench: lseek(SEEK_END) on one file shared by all tasks "
	   "(PostgreSQL's size probe)", .prepare = file_prepare_block, .init = file_init_shared_rdwr,
	   .run = run_end);
