/*
 * File I/O tests come in pairs: "1" works on a private file per task, "2" on one file that every task
 * opens (same inode, separate open file descriptions), so the pair isolates per-inode sharing.
 */
#ifndef MOSBENCH_MICRO_FILEIO_H
#define MOSBENCH_MICRO_FILEIO_H

#include "../micro.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#define FILEIO_SIZE (1UL << 20)
#define FILEIO_BLOCK 4096

static inline int fileio_prepare_shared(void *shared, const char *workdir, unsigned ntasks)
{
	char path[4096];
	(void)shared;
	(void)ntasks;
	int err = micro_path(path, sizeof(path), workdir, "shared.file");
	return err ? err : micro_make_file(path, FILEIO_SIZE);
}

/* Opens the task's file (private or the shared one) and keeps the descriptor in t->priv. */
static inline int fileio_open(struct micro_task *t, int shared)
{
	char path[4096];
	int err = shared ? micro_path(path, sizeof(path), t->workdir, "shared.file")
			 : micro_path(path, sizeof(path), t->workdir, "private.%u", t->nr);
	if (!err && !shared)
		err = micro_make_file(path, FILEIO_SIZE);
	if (err)
		return err;
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return errno;
	t->priv = (void *)(intptr_t)fd;
	return 0;
}

static inline int fileio_fd(const struct micro_task *t)
{
	return (int)(intptr_t)t->priv;
}

static inline int fileio_init_private(struct micro_task *t)
{
	return fileio_open(t, 0);
}

static inline int fileio_init_shared(struct micro_task *t)
{
	return fileio_open(t, 1);
}

/* Declares the private and the shared form of one file test from a single loop body. */
#define FILEIO_TESTS(base, desc, run)                                                                  \
	MICRO_TEST(base##1, .description = desc " (private file per task)", .init = fileio_init_private,  \
		   .run = run);                                                                            \
	MICRO_TEST(base##2, .description = desc " (one file shared by all tasks)",                        \
		   .prepare = fileio_prepare_shared, .init = fileio_init_shared, .run = run)

#endif
