/*
 * Sequential read(2) of a 1 MB file 4 KB at a time, back to the start at the end (the read that
 * finds the end counts too, as in will-it-scale); 3 and 4 read a page at a time with O_DIRECT,
 * bypassing the page cache.
 */
#include "file.h"
#include <stdlib.h>

#define READ_FILE_SIZE (1UL << 20)

static int prepare_shared(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	return file_shared_make(workdir, READ_FILE_SIZE);
}

static int init_private(struct micro_task *t)
{
	return file_private(t, READ_FILE_SIZE);
}

static int init_private_direct(struct micro_task *t)
{
	int err = file_private(t, READ_FILE_SIZE);
	/* Filled through the page cache, then switched: O_DIRECT writes would need an aligned buffer. */
	if (!err && fcntl(file_fd(t), F_SETFL, O_DIRECT))
		err = errno;
	return err;
}

static int init_shared_direct(struct micro_task *t)
{
	return file_shared_open(t, O_RDONLY | O_DIRECT);
}

static void read_loop(struct micro_task *t, char *buf, size_t len)
{
	int fd = file_fd(t);
	for (;;) {
		ssize_t n = read(fd, buf, len);
		MICRO_FAIL_ON(t, n < 0, "read");
		if (n == 0)
			lseek(fd, 0, SEEK_SET);
		micro_count(t);
	}
}

/* As will-it-scale: 4 KB reads through the page cache, a page at a time with O_DIRECT. */
static void run(struct micro_task *t)
{
	read_loop(t, file_buf(t), FILE_BLOCK);
}

static void run_direct(struct micro_task *t)
{
	size_t page = (size_t)getpagesize();
	void *buf = NULL;
	MICRO_FAIL_ON(t, posix_memalign(&buf, page, page), "posix_memalign");
	read_loop(t, buf, page);
}

MICRO_TEST(read1, .description = "Separate file read", .init = init_private, .run = run);
MICRO_TEST(read2, .description = "Same file read", .prepare = prepare_shared, .init = file_init_shared_rdonly,
	   .run = run);
MICRO_TEST(read3, .description = "Separate file O_DIRECT read", .init = init_private_direct,
	   .run = run_direct);
MICRO_TEST(read4, .description = "Same file O_DIRECT read", .prepare = prepare_shared,
	   .init = init_shared_direct, .run = run_direct);
