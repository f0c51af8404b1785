/*
 * fxmark.h - what FxMark's operations share (Min et al., "Understanding Manycore Scalability of File
 * Systems", USENIX ATC 2016), as testcases of the micro driver.
 *
 * Each operation is a small function in data.c (D*: block reads and writes) or meta.c (M*: path walk,
 * directory reads and updates), named as FxMark names it: a letter for the kind (Data or Metadata), R or
 * W, two letters for the operation and the sharing level last, L(ow: private), M(edium: a shared file
 * or directory, private parts of it) or H(igh: the same block, the same path). Each does and counts what
 * FxMark's does, in a directory layout of the same shape; docs/FXMARK.md lists where it must differ.
 *
 * The driver's working directory (micro.XXXXXX in the mounted file system, --workdir) is FxMark's root:
 * a task's private directory is "<workdir>/<task>", FxMark's "<root>/<worker>".
 *
 * FxMark runs each operation until its time is up or its pool runs out (an unlink benchmark stops when
 * every file is gone, an append one at ENOSPC) and divides the work by the time each worker worked. A
 * mosbench window needs the work to go on, so those operations refill their pool when it runs out
 * (re-create the unlinked files, truncate the appended file) and count nothing while they do. The time a
 * task spends refilling is published beside its count, so the harness divides by the time it worked, as
 * FxMark does:
 *
 *   slot word 0   the count (micro_count)
 *   slot word 1   nanoseconds spent refilling, finished refills
 *   slot word 2   CLOCK_MONOTONIC nanoseconds the refill in progress began at, 0 when none
 *
 * Each task's slot is 128 bytes (driver.c's SLOT_STRIDE, in the counter file's header, which
 * workloads/fxmark.py checks holds three words). Words 1 and 2 are written only by the slot's task.
 */
#ifndef MOSBENCH_FXMARK_H
#define MOSBENCH_FXMARK_H

#include "micro.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FX_BLOCK 4096
/* DRBM and DWOM: each task's region of the shared file (FxMark's PRIVATE_REGION_SIZE). */
#define FX_REGION ((off_t)8 << 20)
/* Defaults of the pools' sizes (--param files=N, --param blocks=N; workloads/fxmark.py passes its own). */
#define FX_FILES 10000
#define FX_BLOCKS 4096
#define FX_PATH 4096

/* A task's state: its descriptor, one page-aligned block (O_DIRECT wants it), its pool, its paths. */
struct fx_task {
	int fd;
	char *block;
	uint64_t next;		/* the pool's next item */
	uint64_t pool;		/* the pool's size: files, or blocks */
	uint64_t seed;		/* MRPM's path generator */
	char dir[FX_PATH];	/* the directory the operation works in */
	char path[FX_PATH];	/* the file it works on, where it has one */
};

static inline struct fx_task *fx(struct micro_task *t)
{
	return t->priv;
}

/* O_DIRECT where the run asks for direct I/O (--param directio=1): the D* operations' files. */
static inline int fx_io_flags(void)
{
	return micro_param("directio", 0) ? O_DIRECT : 0;
}

static inline uint64_t fx_files(void)
{
	long n = micro_param("files", FX_FILES);
	return n > 0 ? (uint64_t)n : 1;
}

static inline uint64_t fx_blocks(void)
{
	long n = micro_param("blocks", FX_BLOCKS);
	return n > 1 ? (uint64_t)n : 2;
}

static inline int fx_mkdir(const char *path)
{
	return mkdir(path, 0700) && errno != EEXIST ? errno : 0;
}

/* Sets t->priv to a new task state whose dir is the task's own directory (made) or, shared, the workdir. */
static inline int fx_task_new(struct micro_task *t, bool shared)
{
	struct fx_task *f = calloc(1, sizeof(*f));
	void *block = NULL;
	if (!f || posix_memalign(&block, FX_BLOCK, FX_BLOCK)) {
		free(f);
		return ENOMEM;
	}
	memset(block, 0, FX_BLOCK);
	f->fd = -1;
	f->block = block;
	t->priv = f;
	if (shared) {
		if (snprintf(f->dir, sizeof(f->dir), "%s", t->workdir) >= (int)sizeof(f->dir))
			return ENAMETOOLONG;
		return 0;
	}
	int err = micro_path(f->dir, sizeof(f->dir), t->workdir, "%u", t->nr);
	return err ? err : fx_mkdir(f->dir);
}

/* Writes n blocks at the descriptor's position one block at a time, as FxMark fills its files. */
static inline int fx_write_blocks(int fd, const char *block, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		ssize_t w = write(fd, block, FX_BLOCK);
		if (w != FX_BLOCK)
			return w < 0 ? errno : EIO;
	}
	return 0;
}

/* Opens (creating) the file at f->path with the run's I/O flags into f->fd. */
static inline int fx_open_file(struct fx_task *f, int flags)
{
	f->fd = open(f->path, O_CREAT | O_RDWR | flags, 0700);
	return f->fd < 0 ? errno : 0;
}

/* Creates the empty file at path (and closes it). */
static inline int fx_touch(const char *path)
{
	int fd = open(path, O_CREAT | O_RDWR, 0700);
	if (fd < 0)
		return errno;
	return close(fd) ? errno : 0;
}

/* The shared file of DRBM, DRBH and DWOM, made in prepare() with size blocks, synced. */
static inline int fx_make_shared_file(const char *workdir, const char *name, uint64_t blocks)
{
	char path[FX_PATH];
	void *block = NULL;
	int err = micro_path(path, sizeof(path), workdir, "%s", name);
	if (err)
		return err;
	if (posix_memalign(&block, FX_BLOCK, FX_BLOCK))
		return ENOMEM;
	memset(block, 0, FX_BLOCK);
	int fd = open(path, O_CREAT | O_RDWR | fx_io_flags(), 0700);
	err = fd < 0 ? errno : fx_write_blocks(fd, block, blocks);
	if (fd >= 0 && !err && fsync(fd))
		err = errno;
	if (fd >= 0)
		close(fd);
	free(block);
	return err;
}

static inline uint64_t fx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The time from here to fx_refill_end is not the operation's: the harness leaves it out of the window. */
static inline void fx_refill_begin(struct micro_task *t)
{
	atomic_store_explicit(t->iterations + 2, fx_now_ns(), memory_order_release);
}

static inline void fx_refill_end(struct micro_task *t)
{
	_Atomic uint64_t *done = t->iterations + 1, *since = t->iterations + 2;
	uint64_t spent = fx_now_ns() - atomic_load_explicit(since, memory_order_relaxed);
	/* The total first, then the mark: a reader that sees the mark unchanged around its read of the
	 * total has a consistent pair (workloads/fxmark.py reads mark, total, mark). */
	atomic_store_explicit(done, atomic_load_explicit(done, memory_order_relaxed) + spent, memory_order_release);
	atomic_store_explicit(since, 0, memory_order_release);
}

#endif
