/*
 * The talk's insight 3, "avoiding write locks": an address space's mapped regions kept in a lock-free
 * skip list (scale/skiplist.h) against a radix tree shaped like a page table (scale/radix.h). Keys are
 * virtual page numbers; one counted operation is an mmap, a fault and an munmap: insert a key chosen
 * at random, look it up, delete it.
 *   ranges/FORM     task nr works in [base + nr*R, base + (nr+1)*R): independent mmaps in one address
 *                   space. Only the structure is shared: the skip list's head and tall towers, the
 *                   radix tree's upper nodes;
 *   samerange/FORM  every task works in [base, base + R): the same mmaps, the contrast, where tasks
 *                   share the nodes of their keys too.
 * R is --param range_keys=R (default 4096, at least 2). Before the start each range is half full, the
 * keys at its even offsets (the long-lived mappings, which give the skip list real towers among the
 * tasks' keys); tasks insert and delete the keys at its odd offsets. In ranges nobody else touches a
 * task's keys, so every insert must succeed and be found and every delete succeed (a failure ends the
 * run); in samerange another task may have inserted or deleted the key first, which is normal and
 * counted all the same.
 */
#include "bench.h"
#include "scale/radix.h"
#include "scale/skiplist.h"

#include <errno.h>
#include <urcu.h>

/* The page number of 0x7f0000000000, where Linux places mmaps on x86-64 (below the stack). */
#define RANGES_BASE UINT64_C(0x7f0000000)

struct ranges {
	struct skiplist list;
	struct radix tree;
	uint64_t range;		/* R */
};

/* An mmap: an insert into the chosen structure; the random word gives the skip list's tower height. */
static inline int map(struct ranges *g, bool radix, uint64_t key, uint64_t random)
{
	return radix ? radix_insert(&g->tree, key, key) : skiplist_insert(&g->list, key, key, random);
}

/* A page fault: a lookup. */
static inline bool fault(struct ranges *g, bool radix, uint64_t key, uint64_t *value)
{
	return radix ? radix_lookup(&g->tree, key, value) : skiplist_lookup(&g->list, key, value);
}

/* An munmap: a delete. */
static inline bool unmap(struct ranges *g, bool radix, uint64_t key)
{
	return radix ? radix_delete(&g->tree, key, NULL) : skiplist_delete(&g->list, key, NULL);
}

/* Sets up the structure and fills the even offsets of every range the tasks will use. */
static int prepare(struct ranges *g, unsigned ntasks, bool radix, bool same)
{
	long r = micro_param("range_keys", 4096);
	if (r < 2 || (uint64_t)r >= RADIX_KEY_LIMIT)
		return EINVAL;
	unsigned nranges = same ? 1 : ntasks;
	uint64_t rng = 0x2545f4914f6cdd1dull;
	if ((uint64_t)r * nranges > RADIX_KEY_LIMIT - RANGES_BASE)
		return EINVAL;
	g->range = (uint64_t)r;
	int err = radix ? radix_init(&g->tree) : skiplist_init(&g->list);
	if (err)
		return err;
	if (!radix)
		rcu_register_thread();
	for (uint64_t first = RANGES_BASE; nranges-- > 0 && !err; first += g->range)
		for (uint64_t k = 0; k < g->range && !err; k += 2)
			err = map(g, radix, first + k, bench_rand(&rng));
	if (!radix)
		rcu_unregister_thread();
	return err;
}

static int prepare_ranges_skiplist(void *shared, const char *workdir, unsigned ntasks)
{
	(void)workdir;
	return prepare(shared, ntasks, false, false);
}

static int prepare_ranges_radix(void *shared, const char *workdir, unsigned ntasks)
{
	(void)workdir;
	return prepare(shared, ntasks, true, false);
}

static int prepare_samerange_skiplist(void *shared, const char *workdir, unsigned ntasks)
{
	(void)workdir;
	return prepare(shared, ntasks, false, true);
}

static int prepare_samerange_radix(void *shared, const char *workdir, unsigned ntasks)
{
	(void)workdir;
	return prepare(shared, ntasks, true, true);
}

/* The skip list's operations are RCU read-side critical sections and its deletes call call_rcu. */
static int init_rcu(struct micro_task *t)
{
	(void)t;
	rcu_register_thread();
	return 0;
}

/* Each task's own generator: its keys and its towers' heights come from no shared state. */
static inline void run(struct micro_task *t, bool radix, bool same)
{
	struct ranges *g = t->shared;
	_Atomic uint64_t *ops = t->iterations;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (t->nr + 1), v;
	uint64_t first = RANGES_BASE + (same ? 0 : (uint64_t)t->nr * g->range), odd = g->range / 2;
	for (;;) {
		uint64_t key = first + 2 * (bench_rand(&rng) % odd) + 1;
		int err = map(g, radix, key, bench_rand(&rng));
		if (!same) {
			if (err)
				micro_fail(t, "insert of a key of the task's own range failed", err);
			if (!fault(g, radix, key, &v) || v != key)
				micro_fail(t, "a key the task inserted was not found", 0);
			if (!unmap(g, radix, key))
				micro_fail(t, "a key the task inserted could not be deleted", 0);
		} else {
			/* Present already (EEXIST) or gone again before the lookup: another task's doing. */
			if (err && err != EEXIST)
				micro_fail(t, "insert failed", err);
			if (fault(g, radix, key, &v) && v != key)
				micro_fail(t, "a key was found with another key's value", 0);
			unmap(g, radix, key);
		}
		micro_inc(ops);
	}
}

static void run_ranges_skiplist(struct micro_task *t)
{
	run(t, false, false);
}

static void run_ranges_radix(struct micro_task *t)
{
	run(t, true, false);
}

static void run_samerange_skiplist(struct micro_task *t)
{
	run(t, false, true);
}

static void run_samerange_radix(struct micro_task *t)
{
	run(t, true, true);
}

#define RANGES(id, name, what, init_fn)                                                                    \
	MICRO_TEST_NAMED(id, name, .description = what, .shared_size = sizeof(struct ranges),               \
			 .threads_only = true, .prepare = prepare_##id, .init = init_fn, .run = run_##id)

RANGES(ranges_skiplist, "ranges/skiplist",
       "each task its own key range of one lock-free skip list (head and tall towers shared)", init_rcu);
RANGES(ranges_radix, "ranges/radix",
       "each task its own key range of one page-table radix tree (upper nodes shared, read only)", NULL);
RANGES(samerange_skiplist, "samerange/skiplist", "every task in one key range of one lock-free skip list",
       init_rcu);
RANGES(samerange_radix, "samerange/radix", "every task in one key range of one page-table radix tree", NULL);
