/*
 * commute.h - situations of the scalable commutativity rule (Clements et al., SOSP 2013) as testcases
 * of the micro driver.
 *
 * A situation is two calls, A and B, in one state. Task roles, by --param side:
 *   0  every task runs A (at one task: A's alone rate),
 *   1  every task runs B,
 *   2  task nr runs role nr % 2 as a member of pair nr / 2 (the default).
 * prepare() builds the same state whatever the side: both roles' objects of max(1, (ntasks + 1) / 2)
 * pairs, so A alone runs in exactly the state it has beside B. A situation whose two calls act on one
 * object ("same name", "same page") gives role 1 role 0's object; role 1's own is built all the same.
 *
 * One iteration is the counted call and the undo that puts the state back (open, then close; unlink,
 * then link back), so a one-second run is a steady loop and the state never drifts.
 *
 * The list format (driver --list prints "name TAB description"): the description is
 * VERDICT TAB MODE TAB STATE TAB WHY, with VERDICT commutes|conflicts and MODE threads|procs; the
 * harness (mosbench/workloads/commute.py) parses it.
 */
#ifndef MOSBENCH_COMMUTE_H
#define MOSBENCH_COMMUTE_H

#include "micro.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

/* Room for "workdir/dir/name": the driver's workdir is relative, "micro.XXXXXX" or alike. */
#define COMMUTE_PATH 128

/* One side's iteration: the counted call and its undo, on the task's own copy of its object. */
typedef void commute_fn(struct micro_task *t, void *obj);

/* A call as a role runs it, with what its object must be like at rest (the area's NEED_ bits). */
struct commute_op {
	commute_fn *fn;
	unsigned needs;
};

/* What t->priv holds in every situation. */
struct commute_task {
	commute_fn *fn;
	void *obj;
};

static inline unsigned commute_npairs(unsigned ntasks)
{
	return ntasks > 1 ? (ntasks + 1) / 2 : 1;
}

/* The object index of pair p, role r: 2p + r. */
static inline unsigned commute_nobjs(unsigned ntasks)
{
	return 2 * commute_npairs(ntasks);
}

/*
 * The task's role and the index of the object it works on. Sides 0 and 1 are alone rates: one task
 * per pair's object, so at most npairs tasks (one, at one core, where the harness runs them).
 */
static inline unsigned commute_place(struct micro_task *t, bool same, unsigned *role)
{
	long side = micro_param("side", 2);
	unsigned pair;
	if (side == 2) {
		*role = t->nr % 2;
		pair = t->nr / 2;
	} else if (side == 0 || side == 1) {
		*role = (unsigned)side;
		pair = t->nr;
		if (pair >= commute_npairs(t->ntasks))
			micro_fail(t, "side 0 and 1 are alone rates: run them as one task", EINVAL);
	} else {
		micro_fail(t, "--param side must be 0, 1 or 2", EINVAL);
	}
	return 2 * pair + (same ? 0 : *role);
}

/* What role r's object must have at rest: role 0's is role 1's too when they share it, so it has both's. */
static inline unsigned commute_needs(const struct commute_op *const op[2], bool same, unsigned r)
{
	return op[r]->needs | (r == 0 && same ? op[1]->needs : 0);
}

/*
 * Every area's init: the task's place, its role's call and its own copy of its object (objs holds
 * prepare's objects, size bytes each), which the call may change. Returns the copy for the area to fit
 * to the role (its block, its byte), or NULL (ENOMEM).
 */
static inline void *commute_adopt(struct micro_task *t, const struct commute_op *const op[2], bool same,
				  const void *objs, size_t size, unsigned *role)
{
	unsigned i = commute_place(t, same, role);
	struct commute_task *c = malloc(sizeof(*c));
	void *copy = malloc(size);
	if (!c || !copy) {
		free(c);
		free(copy);
		return NULL;
	}
	memcpy(copy, (const char *)objs + (size_t)i * size, size);
	*c = (struct commute_task){ op[*role]->fn, copy };
	t->priv = c;
	return copy;
}

static inline void commute_run(struct micro_task *t)
{
	const struct commute_task *c = t->priv;
	commute_fn *fn = c->fn;
	void *obj = c->obj;
	for (;;) {
		fn(t, obj);
		micro_count(t);
	}
}

/* Ends the point unless a call returned what it must (a short count is EIO: errno says nothing). */
static inline void commute_expect(struct micro_task *t, long got, long want, const char *what)
{
	if (got != want)
		micro_fail(t, what, got < 0 ? errno : EIO);
}

/* open read-only (+close), for fds and names: a lookup and a new descriptor, the lowest free one. */
static inline void commute_open_close(struct micro_task *t, const char *path)
{
	int fd = open(path, O_RDONLY);
	MICRO_FAIL_ON(t, fd < 0, "open");
	MICRO_FAIL_ON(t, close(fd), "close (undo of open)");
}

/*
 * Descriptors for 128 pairs' objects and their calls' own go past a shell's usual soft limit of 1024:
 * up to the hard limit, in prepare() (tasks inherit it).
 */
static inline int commute_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return errno;
	if (rl.rlim_cur >= rl.rlim_max)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl) ? errno : 0;
}

#define COMMUTE_VERDICT_commutes "commutes"
#define COMMUTE_VERDICT_conflicts "conflicts"
/* Threads situations need one descriptor table and address space: the driver refuses them as procs. */
#define COMMUTE_THREADS_ONLY_threads true
#define COMMUTE_THREADS_ONLY_procs false

/*
 * One situation of an area: the area defines struct AREA_situation, AREA_prepare(situation, workdir,
 * ntasks) and AREA_init(situation, task). verdict and mode are bare words (a typo does not compile);
 * state and why are string literals without tabs.
 */
#define COMMUTE_SITUATION(area, id, name, verdict, mode, state, why, ...)                               \
	static const struct area##_situation area##_##id = { __VA_ARGS__ };                               \
	static int area##_prepare_##id(void *shared, const char *workdir, unsigned ntasks)               \
	{                                                                                                 \
		(void)shared;                                                                             \
		return area##_prepare(&area##_##id, workdir, ntasks);                                     \
	}                                                                                                 \
	static int area##_init_##id(struct micro_task *t)                                                \
	{                                                                                                 \
		return area##_init(&area##_##id, t);                                                      \
	}                                                                                                 \
	MICRO_TEST_NAMED(area##_##id, name,                                                               \
			 .description = COMMUTE_VERDICT_##verdict "\t" #mode "\t" state "\t" why,          \
			 .threads_only = COMMUTE_THREADS_ONLY_##mode, .prepare = area##_prepare_##id,      \
			 .init = area##_init_##id, .run = commute_run)

#endif
