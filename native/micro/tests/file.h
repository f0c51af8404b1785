/*
 * The file a file test works on, in will-it-scale's three forms:
 *   "Separate file"             each task's own unlinked file (will-it-scale: mkstemp, then unlink);
 *   "Same file"                 one file made once, opened by every task (separate open file
 *                               descriptions of one inode);
 *   "Same file, different offsets"  that file with a page of its own per task.
 * The task's descriptor, the offset it works at (0, or its own page) and its I/O buffer are kept in
 * t->priv. The buffer is page-aligned and zeroed: will-it-scale's sits on the task's stack, where
 * its offset in the page follows the size of the environment and the copy to or from user space
 * can run 10% slower at some offsets than at others (docs/WORKLOADS.md); a figure that moves with
 * the environment is not the kernel's.
 */
#ifndef MOSBENCH_MICRO_FILE_H
#define MOSBENCH_MICRO_FILE_H

#include "../micro.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_BLOCK 4096
#define FILE_SHARED_NAME "same"

struct file_task {
	int fd;
	off_t offset;
	char *buf;		/* FILE_BLOCK bytes */
};

static inline int file_fd(const struct micro_task *t)
{
	return ((const struct file_task *)t->priv)->fd;
}

static inline off_t file_offset(const struct micro_task *t)
{
	return ((const struct file_task *)t->priv)->offset;
}

static inline char *file_buf(const struct micro_task *t)
{
	return ((const struct file_task *)t->priv)->buf;
}

static inline int file_keep(struct micro_task *t, int fd)
{
	struct file_task *f = malloc(sizeof(*f));
	void *buf = NULL;
	if (!f || posix_memalign(&buf, (size_t)getpagesize(), FILE_BLOCK)) {
		free(f);
		close(fd);
		return ENOMEM;
	}
	memset(buf, 0, FILE_BLOCK);
	*f = (struct file_task){ fd, 0, buf };
	t->priv = f;
	return 0;
}

/* The task's own unlinked file with size zero bytes written (its position left at the end). */
static inline int file_private(struct micro_task *t, size_t size)
{
	int fd, err = micro_tmpfile(t->workdir, 0, &fd);
	if (!err && (err = micro_fill(fd, size)))
		close(fd);
	return err ? err : file_keep(t, fd);
}

/* Makes the shared file with size zero bytes; for prepare(). */
static inline int file_shared_make(const char *workdir, size_t size)
{
	char path[4096];
	int err = micro_path(path, sizeof(path), workdir, FILE_SHARED_NAME);
	return err ? err : micro_make_file(path, size);
}

static inline int file_shared_open(struct micro_task *t, int flags)
{
	char path[4096];
	int err = micro_path(path, sizeof(path), t->workdir, FILE_SHARED_NAME);
	if (err)
		return err;
	int fd = open(path, flags);
	return fd < 0 ? errno : file_keep(t, fd);
}

/* A page of the shared file for each task: the "different offsets" tests. */
static inline int file_shared_make_per_task(const char *workdir, unsigned ntasks)
{
	return file_shared_make(workdir, (size_t)getpagesize() * ntasks);
}


/* prepare() hooks for the shared forms. */
static inline int file_prepare_block(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	return file_shared_make(workdir, FILE_BLOCK);
}

static inline int file_prepare_per_task(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	return file_shared_make_per_task(workdir, ntasks);
}

/* init() hooks: the private file with one block, or the shared file opened read-write / read-only. */
static inline int file_init_private_block(struct micro_task *t)
{
	return file_private(t, FILE_BLOCK);
}

static inline int file_init_private_empty(struct micro_task *t)
{
	return file_private(t, 0);
}

static inline int file_init_shared_rdwr(struct micro_task *t)
{
	return file_shared_open(t, O_RDWR);
}

static inline int file_init_shared_rdonly(struct micro_task *t)
{
	return file_shared_open(t, O_RDONLY);
}

/* The shared file at the task's own page: the "different offsets" tests. */
static inline int file_init_own_page(struct micro_task *t, int flags)
{
	int err = file_shared_open(t, flags);
	if (!err)
		((struct file_task *)t->priv)->offset = (off_t)getpagesize() * t->nr;
	return err;
}

static inline int file_init_own_page_rdwr(struct micro_task *t)
{
	return file_init_own_page(t, O_RDWR);
}

static inline int file_init_own_page_rdonly(struct micro_task *t)
{
	return file_init_own_page(t, O_RDONLY);
}

#endif
