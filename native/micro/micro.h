/*
 * micro.h - the interface between the microbenchmark driver and its testcases.
 *
 * A testcase is one small file that declares itself with MICRO_TEST(). The driver starts one task per
 * CPU (a process or a thread, by --mode), pins it, calls the test's init hook, releases all tasks
 * together through a start gate and then calls run(), which loops forever counting iterations with
 * micro_count(). The driver ends tasks with SIGKILL on their process group, so run() needs no exit
 * path and its loop carries no "should I stop" load.
 *
 * Each task's counter sits on its own 128-byte slot (two cache lines, so the adjacent-line prefetcher
 * does not pair neighbours) in a MAP_SHARED region that the harness may also map read-only.
 */
#ifndef MOSBENCH_MICRO_H
#define MOSBENCH_MICRO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum micro_mode { MICRO_PROCS, MICRO_THREADS };

struct micro_task {
	unsigned nr;			/* 0 .. ntasks-1 */
	unsigned ntasks;
	int cpu;			/* the CPU this task (and any partner) is pinned to */
	enum micro_mode mode;
	/*
	 * This run's scratch directory, relative: the driver works from its parent, so "workdir/name" is
	 * two path components, as will-it-scale's "/tmp/willitscale.XXXXXX" is.
	 */
	const char *workdir;
	void *shared;			/* test's shared area, MAP_SHARED, set up by prepare() */
	void *priv;			/* test's per-task state, set by init() */
	_Atomic uint64_t *iterations;
};

struct micro_test {
	const char *name;
	const char *description;
	size_t shared_size;
	/* Tests of in-process structures (libscale) share pointers between tasks: threads mode only. */
	bool threads_only;
	/* Once, in the host process before any task starts. Returns 0 or an errno. */
	int (*prepare)(void *shared, const char *workdir, unsigned ntasks);
	/* In each task, pinned, before the start gate. Returns 0 or an errno. */
	int (*init)(struct micro_task *t);
	/* In each task after the gate: loops forever. */
	void (*run)(struct micro_task *t);
};

#define MICRO_TEST_NAMED(id, test_name, ...)                                             \
	static const struct micro_test micro_test_##id = { .name = test_name, __VA_ARGS__ }; \
	static const struct micro_test *const micro_test_ptr_##id                        \
		__attribute__((used, section("micro_tests"))) = &micro_test_##id

#define MICRO_TEST(id, ...) MICRO_TEST_NAMED(id, #id, __VA_ARGS__)

/* The value of a --param NAME=VALUE given to the driver, or def when none was given. */
long micro_param(const char *name, long def);

/*
 * Single writer per counter; readers are other processes. On x86-64 one add to memory, the instruction
 * will-it-scale's (*iterations)++ compiles to: a relaxed load and store compile to a load, an add and a
 * store, which cost the 2.5 ns pthread_mutex1/2 loops 9% (371M against 408M ops/s at one process).
 * An aligned 8-byte add is never seen torn.
 */
static inline void micro_add_to(_Atomic uint64_t *ops, uint64_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("addq %1, %0" : "+m"(*(uint64_t *)ops) : "er"(n));
#else
	atomic_store_explicit(ops, atomic_load_explicit(ops, memory_order_relaxed) + n, memory_order_relaxed);
#endif
}

static inline void micro_add(struct micro_task *t, uint64_t n)
{
	micro_add_to(t->iterations, n);
}

static inline void micro_count(struct micro_task *t)
{
	micro_add(t, 1);
}

/*
 * Loops of user-space calls only (a few ns each) keep the counter's address in a local: through t, the
 * compiler must reload it after every opaque call, which costs such a loop 5-10% against
 * will-it-scale's, whose counter pointer is an argument in a register.
 */
static inline void micro_inc(_Atomic uint64_t *ops)
{
	micro_add_to(ops, 1);
}

/*
 * Reports that a task cannot go on (a syscall failed in run()): records the errno and the message
 * for the driver, then ends the task's host so the point is stored as failed, never as a number.
 */
_Noreturn void micro_fail(struct micro_task *t, const char *what, int err);

/* Starts fn(arg) as a partner of task t on t's CPU: a thread in thread mode, a process otherwise. */
int micro_spawn_partner(struct micro_task *t, void (*fn)(void *arg), void *arg);

/* Helpers shared by the file tests: a path inside the run's scratch directory. */
int micro_path(char *buf, size_t len, const char *workdir, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Writes size zero bytes at the descriptor's position; returns 0 or an errno. */
int micro_fill(int fd, size_t size);
/* Creates the named file with size zero bytes (truncating it); returns 0 or an errno. */
int micro_make_file(const char *path, size_t size);
/*
 * Opens a new, already unlinked file in dir (will-it-scale's mkstemp-then-unlink), O_RDWR | flags, so
 * a killed run leaves nothing behind. Returns 0 and sets *fd, or an errno.
 */
int micro_tmpfile(const char *dir, int flags, int *fd);
/*
 * Puts an inaccessible page where the kernel would place a new mapping of `size` bytes, so that every
 * such mapping from now on lands just below it and cannot merge with a neighbour. Without it, a
 * private anonymous mapping placed below glibc's own anonymous pages (the lowest mapping of a small
 * program) merges into them, and mmap1 measures extending and splitting a VMA, at half the speed of
 * will-it-scale's, whose larger binary has a library mapping there instead. Returns 0 or an errno.
 */
int micro_fence_mappings(size_t size);

#define MICRO_FAIL_ON(t, cond, what)                                        \
	do {                                                                \
		if (cond)                                                   \
			micro_fail((t), (what), errno);                     \
	} while (0)

#endif
