/*
 * Descriptors: fstat, lseek, close, pipe, read, write, pread and pwrite (and open and stat where they
 * meet a descriptor).
 *
 * Each object is a file of four 4 KB blocks, each block of its own bytes ('a', 'b', ...), so a read
 * says which block it read; a role works at its own block (or both at block 0), and its descriptor's
 * offset rests there. Where the situation needs them, an object also has a descriptor of the file, a
 * kept second descriptor of the same open file description (close's undo dup2()s it back) and a
 * non-blocking pipe, empty or holding 4 KB. A write writes new bytes and puts the old ones back, so
 * the file's bytes at rest never change: a read of the same block then sees old or new bytes by the
 * order, as the calls' semantics say, not just the bytes of the iteration before.
 */
#include "commute.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define FD_BLOCK 4096
#define FD_BLOCKS 4
#define PIPE_FILL 4096
#define PIPE_MSG 64

/* What a role's object must have at rest (commute_op.needs). */
enum { NEED_FD = 1, NEED_KEEP = 2, NEED_PIPE = 4, NEED_PIPE_DATA = 8 };

enum fd_share {
	FD_OWN,		/* each role its own file, descriptor and pipe */
	FD_SAMEFILE,	/* each role its own open() of role 0's file: one inode, two offsets */
	FD_SAME,	/* role 1 uses role 0's descriptor (one open file description, one offset) and pipe */
};

struct fd_obj {
	char path[COMMUTE_PATH];
	int fd, keep;		/* -1 where not needed */
	int pipe[2];
	off_t off;		/* the role's block */
	char *buf, *old, *new;	/* the task's: FD_BLOCK bytes each; old holds its block's bytes at rest */
};

struct fds_situation {
	const struct commute_op *op[2];
	enum fd_share share;
	bool sameblock;		/* both roles work at block 0 (else role r at block r) */
};

static struct fd_obj *fd_objs;

static off_t block_of(const struct fds_situation *s, unsigned role)
{
	return s->sameblock ? 0 : (off_t)role * FD_BLOCK;
}

/* The file's blocks in one write (as micro_fill does, for the page cache's large folios). */
static int make_blocks(const char *path)
{
	char *data = malloc(FD_BLOCKS * FD_BLOCK);
	if (!data)
		return ENOMEM;
	for (int b = 0; b < FD_BLOCKS; b++)
		memset(data + b * FD_BLOCK, 'a' + b, FD_BLOCK);
	int err = 0, fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		err = errno;
	else if (write(fd, data, FD_BLOCKS * FD_BLOCK) != FD_BLOCKS * FD_BLOCK)
		err = errno ? errno : EIO;
	if (fd >= 0 && close(fd) && !err)
		err = errno;
	free(data);
	return err;
}

static int make_pipe(struct fd_obj *o, bool data)
{
	if (pipe2(o->pipe, O_NONBLOCK))
		return errno;
	if (data) {
		char fill[PIPE_FILL];
		memset(fill, 'p', sizeof(fill));
		if (write(o->pipe[1], fill, sizeof(fill)) != (ssize_t)sizeof(fill))
			return errno ? errno : EIO;
	}
	return 0;
}

static int make_fd_obj(const struct fds_situation *s, const char *workdir, unsigned i)
{
	struct fd_obj *o = &fd_objs[i];
	unsigned r = i % 2, needs = commute_needs(s->op, s->share == FD_SAME, r);
	int err = micro_path(o->path, sizeof(o->path), workdir, "f.%u.%u", i / 2, r);
	o->fd = o->keep = o->pipe[0] = o->pipe[1] = -1;
	o->off = block_of(s, r);
	if (!err)
		err = make_blocks(o->path);
	if (!err && r == 1 && s->share == FD_SAMEFILE)
		memcpy(o->path, fd_objs[i - 1].path, sizeof(o->path));
	if (!err && (needs & NEED_FD)) {
		if ((o->fd = open(o->path, O_RDWR)) < 0 || lseek(o->fd, o->off, SEEK_SET) != o->off)
			err = errno;
	}
	if (!err && (needs & NEED_KEEP) && (o->keep = dup(o->fd)) < 0)
		err = errno;
	if (!err && (needs & NEED_PIPE))
		err = make_pipe(o, needs & NEED_PIPE_DATA);
	return err;
}

static int fds_prepare(const struct fds_situation *s, const char *workdir, unsigned ntasks)
{
	unsigned n = commute_nobjs(ntasks);
	int err = commute_nofile();
	if (!err && !(fd_objs = calloc(n, sizeof(*fd_objs))))
		err = ENOMEM;
	for (unsigned i = 0; i < n && !err; i++)
		err = make_fd_obj(s, workdir, i);
	return err;
}

static char *block_buf(char fill)
{
	void *p = NULL;
	if (posix_memalign(&p, (size_t)getpagesize(), FD_BLOCK))
		return NULL;
	return memset(p, fill, FD_BLOCK);
}

static int fds_init(const struct fds_situation *s, struct micro_task *t)
{
	unsigned role;
	struct fd_obj *o = commute_adopt(t, s->op, s->share == FD_SAME, fd_objs, sizeof(*fd_objs), &role);
	if (!o)
		return ENOMEM;
	o->off = block_of(s, role);
	o->buf = block_buf('p'); /* a pipe's message: the pipes hold 'p' bytes only */
	o->old = block_buf((char)('a' + o->off / FD_BLOCK));
	o->new = block_buf((char)('A' + o->off / FD_BLOCK));
	return o->buf && o->old && o->new ? 0 : ENOMEM;
}

/* open (+close) of the object's file, read-only. */
static void fd_open(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_open_close(t, o->path);
}

static void fd_stat(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	struct stat st;
	MICRO_FAIL_ON(t, stat(o->path, &st), "stat");
}

static void fd_fstat(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	struct stat st;
	MICRO_FAIL_ON(t, fstat(o->fd, &st), "fstat");
}

/* lseek (SEEK_SET) to the role's block: the counted call, and the undo of read and write. */
static void seek_home(struct micro_task *t, const struct fd_obj *o, const char *what)
{
	commute_expect(t, lseek(o->fd, o->off, SEEK_SET), o->off, what);
}

static void fd_lseek(struct micro_task *t, void *p)
{
	seek_home(t, p, "lseek");
}

/* close (+dup2 of the kept descriptor back to the same number): no call takes the lowest free one. */
static void fd_close(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	MICRO_FAIL_ON(t, close(o->fd), "close");
	commute_expect(t, dup2(o->keep, o->fd), o->fd, "dup2 (undo of close)");
}

/*
 * close (+dup of the kept descriptor, which takes the lowest free number): beside an open in the same
 * table, dup2 could replace the file that open just got at our old number.
 */
static void fd_close_lowest(struct micro_task *t, void *p)
{
	struct fd_obj *o = p;
	MICRO_FAIL_ON(t, close(o->fd), "close");
	o->fd = dup(o->keep);
	MICRO_FAIL_ON(t, o->fd < 0, "dup (undo of close)");
}

/* pipe (+close of both ends). */
static void fd_pipe(struct micro_task *t, void *p)
{
	int fds[2];
	(void)p;
	MICRO_FAIL_ON(t, pipe(fds), "pipe");
	MICRO_FAIL_ON(t, close(fds[0]) || close(fds[1]), "close (undo of pipe)");
}

/* read of the role's block at the descriptor's offset (+lseek back to it). */
static void fd_read(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, read(o->fd, o->buf, FD_BLOCK), FD_BLOCK, "read");
	seek_home(t, o, "lseek (undo of read)");
}

/* write of new bytes over the role's block (+pwrite of the old bytes, +lseek back): the file never grows. */
static void fd_write(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, write(o->fd, o->new, FD_BLOCK), FD_BLOCK, "write");
	commute_expect(t, pwrite(o->fd, o->old, FD_BLOCK, o->off), FD_BLOCK, "pwrite (undo of write)");
	seek_home(t, o, "lseek (undo of write)");
}

static void fd_pread(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, pread(o->fd, o->buf, FD_BLOCK, o->off), FD_BLOCK, "pread");
}

/* pwrite of new bytes over the role's block (+pwrite of the old bytes). */
static void fd_pwrite(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, pwrite(o->fd, o->new, FD_BLOCK, o->off), FD_BLOCK, "pwrite");
	commute_expect(t, pwrite(o->fd, o->old, FD_BLOCK, o->off), FD_BLOCK, "pwrite (undo of pwrite)");
}

/* read of 64 bytes from a pipe holding 4 KB (+write of them back): the pipe keeps its level. */
static void pipe_read(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, read(o->pipe[0], o->buf, PIPE_MSG), PIPE_MSG, "read of a pipe");
	commute_expect(t, write(o->pipe[1], o->buf, PIPE_MSG), PIPE_MSG, "write (undo of read of a pipe)");
}

/* write of 64 bytes to a pipe (+read of 64 back). */
static void pipe_write(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, write(o->pipe[1], o->buf, PIPE_MSG), PIPE_MSG, "write to a pipe");
	commute_expect(t, read(o->pipe[0], o->buf, PIPE_MSG), PIPE_MSG, "read (undo of write to a pipe)");
}

/* 64 bytes (writes are atomic below PIPE_BUF) or EAGAIN: what a read of the empty pipe may return. */
static void expect_msg_or_eagain(struct micro_task *t, ssize_t n, const char *what)
{
	if (n != PIPE_MSG && !(n < 0 && errno == EAGAIN))
		micro_fail(t, what, n < 0 ? errno : EIO);
}

/* read of an empty pipe: EAGAIN, or the bytes B just wrote (which B then does not read back). */
static void pipe_read_empty(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	expect_msg_or_eagain(t, read(o->pipe[0], o->buf, PIPE_MSG), "read of an empty pipe");
}

/* write of 64 bytes to the empty pipe (+read of them back, unless A's read took them). */
static void pipe_write_takeback(struct micro_task *t, void *p)
{
	const struct fd_obj *o = p;
	commute_expect(t, write(o->pipe[1], o->buf, PIPE_MSG), PIPE_MSG, "write to a pipe");
	expect_msg_or_eagain(t, read(o->pipe[0], o->buf, PIPE_MSG), "read (undo of write to a pipe)");
}

static const struct commute_op f_open = { fd_open, 0 }, f_stat = { fd_stat, 0 },
				f_fstat = { fd_fstat, NEED_FD }, f_lseek = { fd_lseek, NEED_FD },
				f_close = { fd_close, NEED_FD | NEED_KEEP },
				f_close_lowest = { fd_close_lowest, NEED_FD | NEED_KEEP }, f_pipe = { fd_pipe, 0 },
				f_read = { fd_read, NEED_FD }, f_write = { fd_write, NEED_FD },
				f_pread = { fd_pread, NEED_FD }, f_pwrite = { fd_pwrite, NEED_FD },
				p_read = { pipe_read, NEED_PIPE | NEED_PIPE_DATA },
				p_write = { pipe_write, NEED_PIPE | NEED_PIPE_DATA },
				p_read_empty = { pipe_read_empty, NEED_PIPE },
				p_write_takeback = { pipe_write_takeback, NEED_PIPE };

#define FDS(id, name, verdict, mode, state, why, ...) \
	COMMUTE_SITUATION(fds, id, name, verdict, mode, state, why, __VA_ARGS__)

/* The state texts' common parts. */
#define FILE_TWO_OPENS "a file of 4 KB blocks of distinct bytes per pair, opened by each task (two open file " \
		       "descriptions, two offsets)"
#define FILE_ONE_DESC "a file of 4 KB blocks of distinct bytes per pair, opened once: both tasks use that " \
		      "descriptor (one open file description, one offset)"
#define KEPT "a file per task, B's with a descriptor and a kept second descriptor of it"

FDS(stat_fstat, "stat-fstat/samefile", commutes, threads,
    "one process; a file per pair, which B has open; A stats it by name, B fstats its descriptor",
    "both only read the inode: each returns the same in either order",
    .op = { &f_stat, &f_fstat }, .share = FD_SAMEFILE);
FDS(fstat_fstat, "fstat-fstat/samefile", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each fstat their own descriptor",
    "fstat only reads the inode: both return the same in either order",
    .op = { &f_fstat, &f_fstat }, .share = FD_SAMEFILE);
FDS(fstat_fstat_samedesc, "fstat-fstat/samedesc", commutes, threads,
    "one process; " FILE_ONE_DESC "; A and B each fstat it",
    "fstat only reads: both return the same in either order",
    .op = { &f_fstat, &f_fstat }, .share = FD_SAME);
FDS(fstat_lseek, "fstat-lseek/samedesc", commutes, threads,
    "one process; " FILE_ONE_DESC "; A fstats it, B lseeks it (SEEK_SET) to block 1",
    "fstat does not return the file offset, the only thing the lseek changes",
    .op = { &f_fstat, &f_lseek }, .share = FD_SAME);
FDS(fstat_close, "fstat-close/diffdesc", commutes, threads,
    "one process; a file per task, A's with a descriptor, B's with a descriptor and a kept second one; A "
    "fstats its descriptor, B closes its own and dup2()s its kept one back to the same number",
    "different descriptors of different files, and dup2 names its number: neither call reads what the "
    "other changes",
    .op = { &f_fstat, &f_close });
FDS(lseek_lseek, "lseek-lseek/samefile", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each lseek their own descriptor (SEEK_SET) to their own block",
    "each open() has its own offset: both lseeks return the same and set their own offset in either order",
    .op = { &f_lseek, &f_lseek }, .share = FD_SAMEFILE);
FDS(lseek_read, "lseek-read/samefile", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A lseeks its descriptor to block 0, B reads block 1 through its own "
    "and lseeks back",
    "separate offsets: the read reads its own block wherever A's offset is",
    .op = { &f_lseek, &f_read }, .share = FD_SAMEFILE);
FDS(lseek_read_samedesc, "lseek-read/samedesc", conflicts, threads,
    "one process; " FILE_ONE_DESC "; A lseeks it to block 0, B reads 4 KB at the offset and lseeks back to "
    "block 1",
    "a shared offset: the read returns block 0's bytes if A's lseek came just before it, block 1's if not",
    .op = { &f_lseek, &f_read }, .share = FD_SAME);
FDS(lseek_pread, "lseek-pread/samedesc", commutes, threads,
    "one process; " FILE_ONE_DESC "; A lseeks it to block 0, B preads block 1 through it",
    "pread neither uses nor moves the offset, the only thing the lseek changes",
    .op = { &f_lseek, &f_pread }, .share = FD_SAME);
FDS(close_close, "close-close/diffdesc", commutes, threads,
    "one process; a file per task with a descriptor and a kept second descriptor of it; A and B each close "
    "their own descriptor and dup2() their kept one back to the same number",
    "different descriptors, and dup2 names its number (no call takes the lowest free one): both return "
    "the same in either order",
    .op = { &f_close, &f_close });
FDS(open_close_threads, "open-close/ownfiles-threads", conflicts, threads,
    "one process; " KEPT "; A opens its own file read-only and closes it, B closes its own descriptor and "
    "dup()s its kept one, which takes the lowest free number",
    "one descriptor table: open returns the lowest free descriptor, which is the one B closed if B's close "
    "came first",
    .op = { &f_open, &f_close_lowest });
FDS(open_close_procs, "open-close/ownfiles-procs", commutes, procs,
    "one process per task; " KEPT "; A opens its own file read-only and closes it, B closes its own "
    "descriptor and dup2()s its kept one back to the same number",
    "separate descriptor tables: B's close frees a number in B's table only, so A's open returns the same "
    "in either order",
    .op = { &f_open, &f_close });
FDS(close_pipe, "close-pipe/procs", commutes, procs,
    "one process per task; a file per task, A's with a descriptor and a kept second descriptor of it; A "
    "closes its descriptor and dup2()s its kept one back to the same number, B makes a pipe and closes both "
    "ends",
    "separate descriptor tables: the pipe's descriptors come from B's table, which A's close does not touch",
    .op = { &f_close, &f_pipe });
FDS(pipe_pipe_threads, "pipe-pipe/threads", conflicts, threads,
    "one process; A and B each make a pipe and close both ends",
    "one descriptor table: each pipe gets the lowest free descriptors, so which numbers each call returns "
    "depends on the order",
    .op = { &f_pipe, &f_pipe });
FDS(pipe_pipe_procs, "pipe-pipe/procs", commutes, procs,
    "one process per task; A and B each make a pipe and close both ends",
    "separate descriptor tables: each pipe call returns the same descriptors in either order",
    .op = { &f_pipe, &f_pipe });
FDS(pipe_read, "pipe-read/ownpipe", commutes, threads,
    "one process; a non-blocking pipe per task holding 4 KB; A makes a new pipe and closes both ends, B "
    "reads 64 bytes from its own pipe and writes them back",
    "the pipe call allocates new descriptors and a new pipe; the read uses an existing descriptor of "
    "another pipe",
    .op = { &f_pipe, &p_read });
FDS(pipe_write, "pipe-write/ownpipe", commutes, threads,
    "one process; a non-blocking pipe per task holding 4 KB; A makes a new pipe and closes both ends, B "
    "writes 64 bytes to its own pipe and reads 64 back",
    "the pipe call allocates new descriptors and a new pipe; the write uses an existing descriptor of "
    "another pipe",
    .op = { &f_pipe, &p_write });
FDS(read_read, "read-read/samefile-sameblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each read block 0 through their own descriptor and lseek back",
    "each read moves only its own offset and neither changes data: both return block 0 in either order",
    .op = { &f_read, &f_read }, .share = FD_SAMEFILE, .sameblock = true);
FDS(read_read_samedesc, "read-read/samedesc", conflicts, threads,
    "one process; " FILE_ONE_DESC "; A and B each read 4 KB at the offset and lseek back to block 0",
    "a shared offset: the first read returns block 0 and moves the offset, so the second returns block 1; "
    "which call gets which depends on the order",
    .op = { &f_read, &f_read }, .share = FD_SAME, .sameblock = true);
FDS(read_write, "read-write/samefile-diffblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A reads block 0 and lseeks back, B writes new bytes over block 1 "
    "through its own descriptor, pwrites the old bytes back and lseeks back",
    "different blocks and separate offsets: the read returns block 0's bytes whatever B writes",
    .op = { &f_read, &f_write }, .share = FD_SAMEFILE);
FDS(read_write_sameblock, "read-write/samefile-sameblock", conflicts, threads,
    "one process; " FILE_TWO_OPENS "; A reads block 0 and lseeks back, B writes new bytes over block 0 "
    "through its own descriptor, pwrites the old bytes back and lseeks back",
    "the same bytes: the read returns the old bytes before the write and the new ones after it",
    .op = { &f_read, &f_write }, .share = FD_SAMEFILE, .sameblock = true);
FDS(read_write_pipe, "read-write/samepipe-nonempty", commutes, threads,
    "one process; a non-blocking pipe per pair holding 4 KB of one byte value; A reads 64 bytes and writes "
    "them back, B writes 64 bytes and reads 64 back",
    "a non-empty pipe: the read takes bytes from the front and the write appends at the back, so each "
    "returns the same in either order",
    .op = { &p_read, &p_write }, .share = FD_SAME);
FDS(read_write_pipe_empty, "read-write/samepipe-empty", conflicts, threads,
    "one process; an empty non-blocking pipe per pair; A reads 64 bytes (EAGAIN, or B's bytes), B writes "
    "64 bytes and reads them back unless A took them",
    "an empty pipe: the read fails with EAGAIN (or blocks) before the write and returns its bytes after it",
    .op = { &p_read_empty, &p_write_takeback }, .share = FD_SAME);
FDS(read_pread, "read-pread/samedesc", commutes, threads,
    "one process; " FILE_ONE_DESC "; A reads block 0 at the offset and lseeks back, B preads block 1 "
    "through the same descriptor",
    "pread neither uses nor moves the offset, and neither call changes data: each returns the same in "
    "either order",
    .op = { &f_read, &f_pread }, .share = FD_SAME);
FDS(write_write, "write-write/samefile-diffblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each write new bytes over their own block through their own "
    "descriptor, pwrite the old bytes back and lseek back",
    "different blocks and separate offsets: both results and the file's bytes are the same in either order",
    .op = { &f_write, &f_write }, .share = FD_SAMEFILE);
FDS(pread_pread, "pread-pread/samefile-sameblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each pread block 0",
    "reads only: both return the same bytes in either order",
    .op = { &f_pread, &f_pread }, .share = FD_SAMEFILE, .sameblock = true);
FDS(pread_pwrite, "pread-pwrite/samefile-diffblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A preads block 0, B pwrites new bytes over block 1 and pwrites the "
    "old bytes back",
    "different blocks: the pread returns block 0's bytes whatever B writes",
    .op = { &f_pread, &f_pwrite }, .share = FD_SAMEFILE);
FDS(pread_pwrite_sameblock, "pread-pwrite/samefile-sameblock", conflicts, threads,
    "one process; " FILE_TWO_OPENS "; A preads block 0, B pwrites new bytes over block 0 and pwrites the "
    "old bytes back",
    "the same bytes: the pread returns the old bytes before the pwrite and the new ones after it",
    .op = { &f_pread, &f_pwrite }, .share = FD_SAMEFILE, .sameblock = true);
FDS(pwrite_pwrite, "pwrite-pwrite/samefile-diffblock", commutes, threads,
    "one process; " FILE_TWO_OPENS "; A and B each pwrite new bytes over their own block and pwrite the old "
    "bytes back",
    "different blocks: both results and the file's bytes are the same in either order",
    .op = { &f_pwrite, &f_pwrite }, .share = FD_SAMEFILE);
FDS(pwrite_pwrite_difffile, "pwrite-pwrite/difffile", commutes, threads,
    "one process; a file of 4 KB blocks per task, each task with its own descriptor; A and B each pwrite "
    "new bytes over a block of their own file and pwrite the old bytes back",
    "different files: nothing either call reads or writes is the other's",
    .op = { &f_pwrite, &f_pwrite });
