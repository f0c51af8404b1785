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
 * FxMark's root is the driver's working directory (micro.XXXXXX in the mounted file system, --workdir),
 * named absolutely as FxMark names its --root: every path an operation walks starts at "/", so a path
 * walk costs what FxMark's costs when both roots are as deep. A task's private directory is
 * "<root>/<task>", FxMark's "<root>/<worker>".
 *
 * Pools are FxMark's: made before the start gate, as FxMark's pre_work makes them (until the file system
 * is full, or for the run's length), written back before it as FxMark syncs before its start (FX_TEST),
 * and never made again. A task whose pool runs out (its files all unlinked or moved, its file truncated
 * to one block) or whose file system is full (ENOSPC) stops there, as FxMark's worker does, and
 * publishes when it stopped beside its count, so the harness divides its work by the time it worked,
 * FxMark's works over its worker's seconds:
 *
 *   slot word 0   the count (micro_count)
 *   slot word 1   CLOCK_MONOTONIC nanoseconds the task stopped at; 0 while it works
 *
 * Each task's slot is 128 bytes (driver.c's SLOT_STRIDE, in the counter file's header, which
 * workloads/fxmark.py checks holds two words). Word 1 is written once, by the slot's task.
 *
 * --param files=N and --param blocks=N bound a pool below "until full" (0, the default: no bound), and
 * --param fill_ms=N is "the run's length" of the operations FxMark fills for its duration (MRDL, MRDM,
 * MWRM; 0: until full).
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
#define FX_PATH 4096

/* A task's state: its descriptor, one page-aligned block (O_DIRECT wants it), its pool, its paths. */
struct fx_task {
	int fd;
	char *block;
	uint64_t next;		/* the pool's next item */
	uint64_t pool;		/* the pool's size: files, or blocks */
	char root[FX_PATH];	/* FxMark's --root: the working directory, absolute */
	char dir[FX_PATH];	/* the directory the operation works in: root, or root/<task> */
	char path[FX_PATH];	/* the file it works on, where it has one */
	char prefix[FX_PATH];	/* a pool's names but the number: "<dir>/u_file_rm-" */
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

/* A pool's bound (--param files or blocks): UINT64_MAX, none, unless the run gives one. */
static inline uint64_t fx_bound(const char *name)
{
	long n = micro_param(name, 0);
	return n > 0 ? (uint64_t)n : UINT64_MAX;
}

static inline uint64_t fx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* When a fill "for the run's length" ends (--param fill_ms), or UINT64_MAX: until full. */
static inline uint64_t fx_fill_deadline(void)
{
	long ms = micro_param("fill_ms", 0);
	return ms > 0 ? fx_now_ns() + (uint64_t)ms * 1000000u : UINT64_MAX;
}

/* The working directory as an absolute path, FxMark's --root: the driver works from its parent. */
static inline int fx_root(char *buf, size_t len, const char *workdir)
{
	char cwd[FX_PATH];
	if (!getcwd(cwd, sizeof(cwd)))
		return errno;
	return micro_path(buf, len, cwd, "%s", workdir);
}

static inline int fx_mkdir(const char *path)
{
	return mkdir(path, 0700) && errno != EEXIST ? errno : 0;
}

/* Sets t->priv to a new task state whose dir is the task's own directory (made) or, shared, the root. */
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
	int err = fx_root(f->root, sizeof(f->root), t->workdir);
	if (err)
		return err;
	if (shared) {
		memcpy(f->dir, f->root, sizeof(f->dir));
		return 0;
	}
	err = micro_path(f->dir, sizeof(f->dir), f->root, "%u", t->nr);
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
	char root[FX_PATH], path[FX_PATH];
	void *block = NULL;
	int err = fx_root(root, sizeof(root), workdir);
	if (!err)
		err = micro_path(path, sizeof(path), root, "%s", name);
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

/*
 * FxMark's first worker calls sync() once every worker's pre_work is done, just before the start:
 * without it the pools filled before the gate (DWTL, MWUL, MWUM, MRD*, MWRM) are still dirty when the
 * window opens, and their writeback (on ext4, the journal's checkpoints) can land on the window's
 * operations. Here each task writes back the file system it works in after its own init, so once the
 * last is ready everything made before the gate is written. syncfs, not sync: the state of the measured
 * file system is the same, and a point does not wait on the machine's other disks.
 */
static inline int fx_syncfs(const char *workdir)
{
	int fd = open(workdir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return errno;
	int err = syncfs(fd) ? errno : 0;
	close(fd);
	return err;
}

/* An operation's testcase: init_fn, then fx_syncfs, before the start gate. */
#define FX_TEST(id, init_fn, ...)                                    \
	static int id##_ready(struct micro_task *t)                  \
	{                                                            \
		int err = init_fn(t);                                \
		return err ? err : fx_syncfs(t->workdir);            \
	}                                                            \
	MICRO_TEST(id, .init = id##_ready, __VA_ARGS__)

/*
 * The task's pool ran out or its file system is full: it stops, as FxMark's worker does, and says when,
 * so its work is rated over the time it worked. It never counts again; the driver ends it with the rest.
 */
static inline _Noreturn void fx_stop(struct micro_task *t)
{
	atomic_store_explicit(t->iterations + 1, fx_now_ns(), memory_order_release);
	for (;;)
		pause();
}

#endif
