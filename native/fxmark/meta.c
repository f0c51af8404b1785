/*
 * FxMark's metadata operations: path resolution (MRP*), directory reads (MRD*) and directory updates
 * (MWC*, MWU*, MWR*). One counted iteration is one call (a stat, a file made, unlinked or renamed, a
 * directory entry read), as FxMark counts its works.
 */
#include "fxmark.h"

#include <dirent.h>
#include <inttypes.h>

/* MRPM and MRPH's tree: FANOUT directories on each of DEPTH - 1 levels, FANOUT files in each leaf. */
#define FANOUT 8
#define DEPTH 5

/* MRPL: stat the task's own file five levels down ("<task>/0/0/0/0"). */
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

MICRO_TEST(MRPL, .description = "path resolution: stat a private file five levels down", .init = mrpl_init,
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

/* The shared tree "<workdir>/a/b/c/d/e", every digit 0..FANOUT-1: 4680 directories and 32768 files. */
static int tree_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	char path[FX_PATH];
	if (snprintf(path, sizeof(path), "%s", workdir) >= (int)sizeof(path))
		return ENAMETOOLONG;
	return make_tree(path, strlen(path), 0);
}

/*
 * MRPM walks the tree as FxMark's does: each path's digits are a chain of its generator
 * (x' = 1103515245 x + 12345 mod 2^32) taken mod FANOUT, the first one following the last path's first.
 * Mod 8 the chain is x' = 5x + 1 mod 8 (the constants' low bits), so the digits of the whole path follow
 * from the first, which goes round all eight values: every task walks the same eight paths, starting at
 * its own. docs/FXMARK.md says what that means for the sharing level.
 */
static unsigned next_digit(unsigned d)
{
	return (5 * d + 1) % FANOUT;
}

static int mrpm_init(struct micro_task *t)
{
	int err = fx_task_new(t, true);
	if (!err)
		fx(t)->seed = t->nr % FANOUT;
	return err;
}

static void mrp_shared_run(struct micro_task *t, bool same)
{
	struct fx_task *f = fx(t);
	struct stat st;
	unsigned d[DEPTH] = { 0 };
	for (;;) {
		if (!same) {
			d[0] = next_digit((unsigned)f->seed);
			f->seed = d[0];
			for (int i = 1; i < DEPTH; i++)
				d[i] = next_digit(d[i - 1]);
		}
		/* Formatted every time, as FxMark's loop does for both MRPM and MRPH. */
		if (micro_path(f->path, sizeof(f->path), f->dir, "%u/%u/%u/%u/%u", d[0], d[1], d[2], d[3], d[4]))
			micro_fail(t, "path too long", ENAMETOOLONG);
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

MICRO_TEST(MRPM, .description = "path resolution: stat files of a shared five-level tree (FxMark's eight paths)",
	   .prepare = tree_prepare, .init = mrpm_init, .run = mrpm_run);
MICRO_TEST(MRPH, .description = "path resolution: stat the same file of a shared five-level tree",
	   .prepare = tree_prepare, .init = mrpm_init, .run = mrph_run);

/* Makes files [from, to) named fmt (with the task's number first where shared) in the task's directory. */
static int make_files(struct micro_task *t, const char *fmt, uint64_t from, uint64_t to)
{
	struct fx_task *f = fx(t);
	for (uint64_t i = from; i < to; i++) {
		int err = micro_path(f->path, sizeof(f->path), f->dir, fmt, t->nr, i);
		if (!err)
			err = fx_touch(f->path);
		if (err)
			return err;
	}
	return 0;
}

/*
 * MRDL, MRDM: read every entry of a directory, from opendir to its end, again and again; each entry read
 * is one unit. FxMark's directory holds the files its tasks made in the benchmark's duration; here each
 * task makes --param files of them. (FxMark's inner loop does not stop at the directory's end, so after
 * the first pass it counts calls that read nothing; docs/FXMARK.md.)
 */
static int mrd_init(struct micro_task *t, bool shared)
{
	int err = fx_task_new(t, shared);
	return err ? err : make_files(t, "n_dir_rd-%u-%" PRIu64 ".dat", 0, fx_files());
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
	const char *dir = fx(t)->dir;
	for (;;) {
		DIR *d = opendir(dir);
		MICRO_FAIL_ON(t, !d, "opendir");
		for (;;) {
			errno = 0;
			if (!readdir(d))
				break;
			micro_count(t);
		}
		MICRO_FAIL_ON(t, errno, "readdir");
		closedir(d);
	}
}

MICRO_TEST(MRDL, .description = "read the entries of a private directory", .init = mrdl_init, .run = mrd_run);
MICRO_TEST(MRDM, .description = "read the entries of the shared directory", .init = mrdm_init, .run = mrd_run);

/*
 * MWCL, MWCM: create a file of a new name (MWCM also writes a block into it, as FxMark's does) and close
 * it. FxMark's tasks create files until the time is up; here a task's last --param files files are
 * unlinked (a refill) each time it has made that many, so the directory never outgrows the file system.
 */
static int mwcl_init(struct micro_task *t)
{
	int err = fx_task_new(t, false);
	if (!err)
		fx(t)->pool = fx_files();
	return err;
}

static int mwcm_init(struct micro_task *t)
{
	int err = fx_task_new(t, true);
	if (!err)
		fx(t)->pool = fx_files();
	return err;
}

static void mwc_run(struct micro_task *t, const char *fmt, bool write_block)
{
	struct fx_task *f = fx(t);
	for (uint64_t made = 0;; made++) {
		if (made == f->pool) {
			fx_refill_begin(t);
			for (uint64_t i = f->next - made; i < f->next; i++) {
				if (micro_path(f->path, sizeof(f->path), f->dir, fmt, t->nr, i))
					micro_fail(t, "path too long", ENAMETOOLONG);
				MICRO_FAIL_ON(t, unlink(f->path), "unlink (refill)");
			}
			made = 0;
			fx_refill_end(t);
		}
		if (micro_path(f->path, sizeof(f->path), f->dir, fmt, t->nr, f->next++))
			micro_fail(t, "path too long", ENAMETOOLONG);
		int fd = open(f->path, O_CREAT | O_RDWR, 0700);
		MICRO_FAIL_ON(t, fd < 0, "open (O_CREAT)");
		MICRO_FAIL_ON(t, write_block && write(fd, f->block, FX_BLOCK) != FX_BLOCK, "write");
		close(fd);
		micro_count(t);
	}
}

static void mwcl_run(struct micro_task *t)
{
	/* Every name holds the task's number (the shared directory's must), the private ones' too. */
	mwc_run(t, "n_inode_alloc-%u-%" PRIu64 ".dat", false);
}

static void mwcm_run(struct micro_task *t)
{
	mwc_run(t, "m_file_cr-%u-%" PRIu64 ".dat", true);
}

MICRO_TEST(MWCL, .description = "create an empty file in a private directory", .init = mwcl_init,
	   .run = mwcl_run);
MICRO_TEST(MWCM, .description = "create a file (and write a block) in the shared directory", .init = mwcm_init,
	   .run = mwcm_run);

/*
 * MWUL, MWUM: unlink an empty file. FxMark makes files until the file system is full and unlinks them
 * until none is left; here each task makes --param files files, unlinks them and makes as many again,
 * under new names, when they are gone (a refill).
 */
static const char *const mwul_fmt = "u_file_rm-%u-%" PRIu64 ".dat";
static const char *const mwum_fmt = "u_sh_file_rm-%u-%" PRIu64 ".dat";

static int mwu_init(struct micro_task *t, bool shared, const char *fmt)
{
	int err = fx_task_new(t, shared);
	if (err)
		return err;
	fx(t)->pool = fx_files();
	return make_files(t, fmt, 0, fx(t)->pool);
}

static int mwul_init(struct micro_task *t)
{
	return mwu_init(t, false, mwul_fmt);
}

static int mwum_init(struct micro_task *t)
{
	return mwu_init(t, true, mwum_fmt);
}

static void mwu_run(struct micro_task *t, const char *fmt)
{
	struct fx_task *f = fx(t);
	for (uint64_t left = f->pool;; left--) {
		if (!left) {
			fx_refill_begin(t);
			int err = make_files(t, fmt, f->next, f->next + f->pool);
			if (err)
				micro_fail(t, "open (O_CREAT, refill)", err);
			left = f->pool;
			fx_refill_end(t);
		}
		if (micro_path(f->path, sizeof(f->path), f->dir, fmt, t->nr, f->next++))
			micro_fail(t, "path too long", ENAMETOOLONG);
		MICRO_FAIL_ON(t, unlink(f->path), "unlink");
		micro_count(t);
	}
}

static void mwul_run(struct micro_task *t)
{
	mwu_run(t, mwul_fmt);
}

static void mwum_run(struct micro_task *t)
{
	mwu_run(t, mwum_fmt);
}

MICRO_TEST(MWUL, .description = "unlink an empty file in a private directory", .init = mwul_init,
	   .run = mwul_run);
MICRO_TEST(MWUM, .description = "unlink an empty file in the shared directory", .init = mwum_init,
	   .run = mwum_run);

/* MWRL: rename the task's one file in its own directory to the next name, and so on (the rename lock). */
static int mwrl_init(struct micro_task *t)
{
	int err = fx_task_new(t, false);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	if ((err = micro_path(f->path, sizeof(f->path), f->dir, "n_file_rename-0.dat")))
		return err;
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
	char other[FX_PATH], *from = f->path, *to = other;
	for (;;) {
		if (micro_path(to, FX_PATH, f->dir, "n_file_rename-%" PRIu64 ".dat", ++f->next))
			micro_fail(t, "path too long", ENAMETOOLONG);
		MICRO_FAIL_ON(t, rename(from, to), "rename");
		char *done = from;
		from = to;
		to = done;
		micro_count(t);
	}
}

MICRO_TEST(MWRL, .description = "rename a file in a private directory", .init = mwrl_init, .run = mwrl_run);

/*
 * MWRM: move a file from the task's own directory into the shared one. FxMark's tasks make files for the
 * benchmark's duration and move them until none is left; here each task makes --param files files and,
 * once all are moved, moves them back (a refill).
 */
static const char *const mwrm_fmt = "n_dir_ins-%u-%" PRIu64 ".dat";

static int mwrm_init(struct micro_task *t)
{
	int err = fx_task_new(t, false);
	if (err)
		return err;
	fx(t)->pool = fx_files();
	return make_files(t, mwrm_fmt, 0, fx(t)->pool);
}

/* The file's two places: in the task's directory and in the shared one (the workdir). */
static void mwrm_paths(struct micro_task *t, uint64_t i, char *mine, char *shared)
{
	if (micro_path(mine, FX_PATH, fx(t)->dir, mwrm_fmt, t->nr, i) ||
	    micro_path(shared, FX_PATH, t->workdir, mwrm_fmt, t->nr, i))
		micro_fail(t, "path too long", ENAMETOOLONG);
}

static void mwrm_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	char shared[FX_PATH];
	for (;;) {
		if (f->next == f->pool) {
			fx_refill_begin(t);
			for (uint64_t i = 0; i < f->pool; i++) {
				mwrm_paths(t, i, f->path, shared);
				MICRO_FAIL_ON(t, rename(shared, f->path), "rename (refill)");
			}
			f->next = 0;
			fx_refill_end(t);
		}
		mwrm_paths(t, f->next++, f->path, shared);
		MICRO_FAIL_ON(t, rename(f->path, shared), "rename");
		micro_count(t);
	}
}

MICRO_TEST(MWRM, .description = "move a file from a private directory into the shared one", .init = mwrm_init,
	   .run = mwrm_run);
