/*
 * FxMark's data operations: a 4 KiB block read (DRB*) or written (DWO*, DWA, DWT, DWS) at one offset, in
 * the run's I/O mode (--param directio=1: O_DIRECT, as FxMark's --directio). One counted iteration is one
 * call, as FxMark counts its works.
 */
#include "fxmark.h"

/* The task's own file in its own directory holding one block: DRBL, DWOL, DWSL. */
static int init_private_block(struct micro_task *t, const char *name)
{
	int err = fx_task_new(t, false);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	if (!(err = micro_path(f->path, sizeof(f->path), f->dir, "%s", name)))
		err = fx_open_file(f, fx_io_flags());
	return err ? err : fx_write_blocks(f->fd, f->block, 1);
}

/* The shared file, opened by every task, at the task's own region (medium sharing) or at 0 (high). */
static int init_shared(struct micro_task *t, const char *name, off_t region)
{
	int err = fx_task_new(t, true);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	f->next = (uint64_t)region * t->nr;
	if (!(err = micro_path(f->path, sizeof(f->path), f->dir, "%s", name)))
		err = fx_open_file(f, fx_io_flags());
	return err;
}

static void run_pread(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	for (;;) {
		MICRO_FAIL_ON(t, pread(f->fd, f->block, FX_BLOCK, (off_t)f->next) != FX_BLOCK, "pread");
		micro_count(t);
	}
}

static void run_pwrite(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	for (;;) {
		MICRO_FAIL_ON(t, pwrite(f->fd, f->block, FX_BLOCK, (off_t)f->next) != FX_BLOCK, "pwrite");
		micro_count(t);
	}
}

/* DRBL: a block of the task's own file. */
static int drbl_init(struct micro_task *t)
{
	return init_private_block(t, "n_file_rd.dat");
}

FX_TEST(DRBL, drbl_init, .description = "read a block of a private file (pread, 4 KiB)", .run = run_pread);

/* DRBM: every task reads the first block of its own 8 MiB region of one shared file. */
static int drbm_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	return fx_make_shared_file(workdir, "n_shfile_rd.dat", (uint64_t)ntasks * (FX_REGION / FX_BLOCK));
}

static int drbm_init(struct micro_task *t)
{
	return init_shared(t, "n_shfile_rd.dat", FX_REGION);
}

FX_TEST(DRBM, drbm_init,
	   .description = "read a private block of a shared file (each task its own 8 MiB region)",
	   .prepare = drbm_prepare, .run = run_pread);

/* DRBH: every task reads the same block of one shared file. */
static int drbh_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)ntasks;
	return fx_make_shared_file(workdir, "n_shblk_rd.dat", 1);
}

static int drbh_init(struct micro_task *t)
{
	return init_shared(t, "n_shblk_rd.dat", 0);
}

FX_TEST(DRBH, drbh_init, .description = "read the same block of a shared file", .prepare = drbh_prepare,
	   .run = run_pread);

/* DWOL: overwrite the one block of the task's own file. */
static int dwol_init(struct micro_task *t)
{
	return init_private_block(t, "n_blk_wrt.dat");
}

FX_TEST(DWOL, dwol_init, .description = "overwrite a block of a private file (pwrite, 4 KiB)",
	   .run = run_pwrite);

/* DWOM: every task overwrites the first block of its own region of one shared file (the inode's lock). */
static int dwom_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	return fx_make_shared_file(workdir, "n_mtime_upt.dat", (uint64_t)ntasks * (FX_REGION / FX_BLOCK));
}

static int dwom_init(struct micro_task *t)
{
	return init_shared(t, "n_mtime_upt.dat", FX_REGION);
}

FX_TEST(DWOM, dwom_init,
	   .description = "overwrite a private block of a shared file (each task its own 8 MiB region)",
	   .prepare = dwom_prepare, .run = run_pwrite);

/*
 * DWAL: append a block to the task's own file (block allocation). The file grows without limit, as
 * FxMark's does: every append allocates a new block. At ENOSPC (or --param blocks appends) the task
 * stops, as FxMark's workers do.
 */
static int dwal_init(struct micro_task *t)
{
	int err = fx_task_new(t, false);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	f->pool = fx_bound("blocks");
	err = micro_path(f->path, sizeof(f->path), f->dir, "n_blk_alloc-%u.dat", t->nr);
	return err ? err : fx_open_file(f, fx_io_flags());
}

static void dwal_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	for (; f->next < f->pool; f->next++) {
		ssize_t w = write(f->fd, f->block, FX_BLOCK);
		if (w != FX_BLOCK) {
			MICRO_FAIL_ON(t, w < 0 && errno != ENOSPC, "write (append)");
			break;
		}
		micro_count(t);
	}
	fx_stop(t);
}

FX_TEST(DWAL, dwal_init, .description = "append a block to a private file (block allocation)",
	   .run = dwal_run);

/*
 * DWTL: truncate the task's own file (in the shared root, as FxMark's) by one block. Before the gate
 * the file is written a block at a time until the file system is full (or --param blocks blocks), as
 * FxMark's pre_work writes it; the task stops when one block is left.
 */
static int dwtl_init(struct micro_task *t)
{
	int err = fx_task_new(t, true);
	if (err)
		return err;
	struct fx_task *f = fx(t);
	if (!(err = micro_path(f->path, sizeof(f->path), f->dir, "u_file_tr-%u.dat", t->nr)))
		err = fx_open_file(f, fx_io_flags());
	for (uint64_t bound = fx_bound("blocks"); !err && f->next < bound;) {
		ssize_t w = write(f->fd, f->block, FX_BLOCK);
		if (w == FX_BLOCK)
			f->next++;
		else
			err = w < 0 ? errno : ENOSPC;	/* a short write: the last blocks there were */
	}
	return err == ENOSPC ? 0 : err;
}

static void dwtl_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	while (f->next > 1) {
		MICRO_FAIL_ON(t, ftruncate(f->fd, (off_t)(--f->next) * FX_BLOCK), "ftruncate");
		micro_count(t);
	}
	fx_stop(t);
}

FX_TEST(DWTL, dwtl_init, .description = "truncate a private file by a block", .run = dwtl_run);

/* DWSL: overwrite the one block of the task's own file and fsync it (the journal's commit). */
static int dwsl_init(struct micro_task *t)
{
	return init_private_block(t, "n_jnl_cmt.dat");
}

static void dwsl_run(struct micro_task *t)
{
	struct fx_task *f = fx(t);
	for (;;) {
		MICRO_FAIL_ON(t, pwrite(f->fd, f->block, FX_BLOCK, 0) != FX_BLOCK, "pwrite");
		MICRO_FAIL_ON(t, fsync(f->fd), "fsync");
		micro_count(t);
	}
}

FX_TEST(DWSL, dwsl_init, .description = "overwrite a block of a private file and fsync it", .run = dwsl_run);
