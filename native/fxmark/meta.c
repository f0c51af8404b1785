/*
 * FxMark's metadata operations: path resolution (MRP*), directory reads (MRD*) and directory updates
 * (MWC*, MWU*, MWR*). One counted iteration is one call (a stat, a readdir, a file made, unlinked or
 * renamed), as FxMark counts its works, with every path named as FxMark names it, from "/".
 */
#include "fxmark.h"

#include <dirent.h>
#include <inttypes.h>

/* MRPM and MRPH's tree: FANOUT directories on each of DEPTH - 1 levels, FANOUT files in each leaf. */
#define FANOUT 8
#define DEPTH 5

/* MRPL: stat the task's own file five levels down ("<root>/<task>/0/0/0/0"). */
static int mrpl_init(struct micro_task *t)
{
	int err = fx_task_new(t, false);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	char dir[FX_PATH];
	for (int depth = 1; depth < DEPTH - 1 && !err; depth++) {
		err = micro_path(dir, sizeof(dir), f->dir, "%.*s", 2 * depth - 1, "0/0/0/0/0");
		if (!err)
			err = fx_mkdir(dir);
	}
	if (!err)
		err = micro_path(f->path, sizeof(f->path), f->dir, "0/0/0/0");
	return err ? err : fx_touch(f->path);
}

static void mrpl_run(struct micro_task *t)
{
	const char *path = fx(t)->path;
	struct stat st;
	for (;;) {
		MICRO_FAIL_ON(t, stat(path, &st), "stat");
		micro_count(t);
	}
}

FX_TEST(MRPL, mrpl_init, .description = "path resolution: stat a private file five levels down",
	   .run = mrpl_run);

/* Makes the directories (levels 0 .. DEPTH - 2) and files (level DEPTH - 1) below path, which holds len bytes. */
static int make_tree(char *path, size_t len, int level)
{
	for (unsigned i = 0; i < FANOUT; i++) {
		int n = snprintf(path + len, FX_PATH - len, "/%u", i);
		if (n < 0 || len + (size_t)n >= FX_PATH)
			return ENAMETOOLONG;
		int err = level == DEPTH - 1 ? fx_touch(path) : fx_mkdir(path);
		if (!err && level < DEPTH - 1)
			err = make_tree(path, len + (size_t)n, level + 1);
		if (err)
			return err;
	}
	path[len] = 0;
	return 0;
}

/* The shared tree "<root>/a/b/c/d/e", every digit 0..FANOUT-1: 4680 directories and 32768 files. */
static int tree_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	char path[FX_PATH];
	int err = fx_root(path, sizeof(path), workdir);
	return err ? err : make_tree(path, strlen(path), 0);
}

static int mrpm_init(struct micro_task *t)
{
	int err = fx_task_new(t, true);
	/* Room for the five digits: the loop formats without checking, as FxMark's. */
	return err ? err : strlen(fx(t)->root) + 2 * DEPTH + 1 > FX_PATH ? ENAMETOOLONG : 0;
}

/* FxMark's path generator: the C library's linear congruential constants, 32 bits. */
static unsigned lcg(unsigned x)
{
	return 1103515245u * x + 12345u;
}

/*
 * Each iteration draws the path's digits (MRPM: a chain of the generator from the last path's first
 * digit, which starts at the task's number; MRPH: all zero) and formats the path as FxMark does, the
 * root and then the digits one call each, six in all: the formatting is a third of the loop's time
 * beside a stat that hits the dentry cache. Mod FANOUT the chain is x' = 5x + 1 mod 8 (the constants'
 * low bits), so every task walks the same eight paths, each from its own start: docs/FXMARK.md.
 */
static void mrp_shared_run(struct micro_task *t, bool same)
{
	struct fx_task *f = fx(t);
	struct stat st;
	unsigned d[DEPTH] = { t->nr };
	for (;;) {
		if (same) {
			for (int i = 0; i < DEPTH; i++)
				d[i] = 0;
		} else {
			d[0] = lcg(d[0]);
			for (int i = 1; i < DEPTH; i++)
				d[i] = lcg(d[i - 1]);
		}
		char *p = f->path;
		p += sprintf(p, "%s", f->root);
		for (int i = 0; i < DEPTH; i++)
			p += sprintf(p, "%c%u", '/', d[i] % FANOUT);
		MICRO_FAIL_ON(t, stat(f->path, &st), "stat");
		micro_count(t);
	}
}

static void mrpm_run(struct micro_task *t)
{
	mrp_shared_run(t, false);
}

static void mrph_run(struct micro_task *t)
{
	mrp_shared_run(t, true);
}

FX_TEST(MRPM, mrpm_init,
	   .description = "path resolution: stat files of a shared five-level tree (FxMark's eight paths)",
	   .prepare = tree_prepare, .run = mrpm_run);
FX_TEST(MRPH, mrpm_init, .description = "path resolution: stat the same file of a shared five-level tree",
	   .prepare = tree_prepare, .run = mrph_run);

/* f->path := the pool's file number i: its prefix (set in init) and the number. */
static void pool_name(struct micro_task *t, uint64_t i)
{
	struct fx_task *f = fx(t);
	if (snprintf(f->path, sizeof(f->path), "%s%" PRIu64 ".dat", f->prefix, i) >= (int)sizeof(f->path))
		micro_fail(t, "path too long", ENAMETOOLONG);
}

/* A new task whose pool's names are "<dir>/<fmt, with its number>": FxMark's, with or without it. */
static int pool_task_new(struct micro_task *t, bool shared, const char *fmt)
{
	int err = fx_task_new(t, shared);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	char name[128];
	snprintf(name, sizeof(name), fmt, t->nr);
	return micro_path(f->prefix, sizeof(f->prefix) - 32, f->dir, "%s", name);
}

/*
 * The pool made before the gate, as FxMark's pre_work makes it: empty files 0, 1, ... until the file
 * system is full, the run's length is over (with_deadline: --param fill_ms) or --param files are made.
 * Their count in f->pool.
 */
static int fill_pool(struct micro_task *t, bool with_deadline)
{
	struct fx_task *f = fx(t);
	uint64_t bound = fx_bound("files"), deadline = with_deadline ? fx_fill_deadline() : UINT64_MAX;
	for (f->pool = 0; f->pool < bound && (deadline == UINT64_MAX || fx_now_ns() < deadline); f->pool++) {
		pool_name(t, f->pool);
		int err = fx_touch(f->path);
		if (err)
			return err == ENOSPC ? 0 : err;
	}
	return 0;
}

/*
 * MRDL, MRDM: FxMark's directory read. Its directory holds the files the task made for the run's length
 * (or until full); the loop opens it once and calls readdir until the time is up, never stopping at its
 * end, and each call is one unit: after the first pass every call is a getdents64 that finds nothing.
 */
static int mrd_init(struct micro_task *t, bool shared)
{
	int err = pool_task_new(t, shared, shared ? "n_shdir_rd-%u-" : "n_dir_rd-%u-");
	return err ? err : fill_pool(t, true);
}

static int mrdl_init(struct micro_task *t)
{
	return mrd_init(t, false);
}

static int mrdm_init(struct micro_task *t)
{
	return mrd_init(t, true);
}

static void mrd_run(struct micro_task *t)
{
	DIR *d = opendir(fx(t)->dir);
	MICRO_FAIL_ON(t, !d, "opendir");
	struct dirent entry, *result;
	for (;;) {
		/* readdir_r, FxMark's call: the entry copied out, as readdir alone would not. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		int err = readdir_r(d, &entry, &result);
#pragma GCC diagnostic pop
		if (err)
			micro_fail(t, "readdir_r", err);
		micro_count(t);
	}
}

FX_TEST(MRDL, mrdl_init, .description = "read a private directory (readdir, on past its end)",
	   .run = mrd_run);
FX_TEST(MRDM, mrdm_init, .description = "read the shared directory (readdir, on past its end)",
	   .run = mrd_run);

/*
 * MWCL, MWCM: create a file of a new name (MWCM also writes a block into it, as FxMark's does) and close
 * it. The directory grows without limit, as FxMark's: at ENOSPC (or --param files) the task stops.
 */
static int mwcl_init(struct micro_task *t)
{
	return pool_task_new(t, false, "n_inode_alloc-");
}

static int mwcm_init(struct micro_task *t)
{
	return pool_task_new(t, true, "m_file_cr-%u-");
}

static void mwc_run(struct micro_task *t, bool write_block)
{
	struct fx_task *f = fx(t);
	for (uint64_t bound = fx_bound("files"); f->next < bound; f->next++) {
		pool_name(t, f->next);
		int fd = open(f->path, O_CREAT | O_RDWR, 0700);
		if (fd < 0) {
			MICRO_FAIL_ON(t, errno != ENOSPC, "open (O_CREAT)");
			break;
		}
		if (write_block && write(fd, f->block, FX_BLOCK) < 0) {
			MICRO_FAIL_ON(t, errno != ENOSPC, "write");
			close(fd);
			break;
		}
		close(fd);
		micro_count(t);
	}
	fx_stop(t);
}

static void mwcl_run(struct micro_task *t)
{
	mwc_run(t, false);
}

static void mwcm_run(struct micro_task *t)
{
	mwc_run(t, true);
}

FX_TEST(MWCL, mwcl_init, .description = "create an empty file in a private directory", .run = mwcl_run);
FX_TEST(MWCM, mwcm_init, .description = "create a file (and write a block) in the shared directory",
	   .run = mwcm_run);

/*
 * MWUL, MWUM: unlink an empty file. Before the gate each task makes files until the file system is full
 * (or --param files), as FxMark's pre_work, and unlinks them in the order made; it stops when none is left.
 */
static int mwul_init(struct micro_task *t)
{
	int err = pool_task_new(t, false, "u_file_rm-");
	return err ? err : fill_pool(t, false);
}

static int mwum_init(struct micro_task *t)
{
	int err = pool_task_new(t, true, "u_sh_file_rm-%u-");
	return err ? err : fill_pool(t, false);
}

static void mwu_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	for (; f->next < f->pool; f->next++) {
		pool_name(t, f->next);
		MICRO_FAIL_ON(t, unlink(f->path), "unlink");
		micro_count(t);
	}
	fx_stop(t);
}

FX_TEST(MWUL, mwul_init, .description = "unlink an empty file in a private directory", .run = mwu_run);
FX_TEST(MWUM, mwum_init, .description = "unlink an empty file in the shared directory", .run = mwu_run);

/* MWRL: rename the task's one file in its own directory to the next name, and so on (the rename lock). */
static int mwrl_init(struct micro_task *t)
{
	int err = pool_task_new(t, false, "n_file_rename-");
	if (err)
		return err;
	struct fx_task *f = fx(t);
	pool_name(t, 0);
	int fd = open(f->path, O_CREAT | O_RDWR, 0700);
	if (fd < 0)
		return errno;
	err = fsync(fd) ? errno : 0;
	close(fd);
	return err;
}

static void mwrl_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	char from[FX_PATH];
	for (;;) {
		/* Both names formatted every time, as FxMark's loop does. */
		pool_name(t, f->next);
		memcpy(from, f->path, sizeof(from));
		pool_name(t, ++f->next);
		MICRO_FAIL_ON(t, rename(from, f->path), "rename");
		micro_count(t);
	}
}

FX_TEST(MWRL, mwrl_init, .description = "rename a file in a private directory", .run = mwrl_run);

/*
 * MWRM: move a file from the task's own directory into the shared one. Before the gate each task makes
 * files for the run's length (or until full), then unlinks the last 5% and one more, so the moves find
 * room, as FxMark's pre_work does; it stops when every file is moved.
 */
static int mwrm_init(struct micro_task *t)
{
	int err = pool_task_new(t, false, "n_dir_ins-%u-");
	if (!err)
		err = fill_pool(t, true);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	for (uint64_t drop = (uint64_t)((double)f->pool * 0.05) + 1; !err && drop && f->pool; drop--) {
		pool_name(t, --f->pool);
		err = unlink(f->path) ? errno : 0;
	}
	return err;
}

static void mwrm_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	char to[FX_PATH];
	for (; f->next < f->pool; f->next++) {
		pool_name(t, f->next);
		if (micro_path(to, sizeof(to), f->root, "%s", strrchr(f->path, '/') + 1))
			micro_fail(t, "path too long", ENAMETOOLONG);
		MICRO_FAIL_ON(t, rename(f->path, to), "rename");
		micro_count(t);
	}
	fx_stop(t);
}

FX_TEST(MWRM, mwrm_init, .description = "move a file from a private directory into the shared one",
	   .run = mwrm_run);
