/*
 * The address space's VMA tree (the talk's insight 2, "avoiding read locks"), one tree in three forms.
 * Each iteration is a page fault: a lookup of a random address inside a random mapped range. With
 * probability update_percent percent it is instead an update: the task moves one of its own ranges,
 * munmap and then mmap at another free place in its own region, so the tree keeps its size and no
 * update can fail.
 *   tree/stock      lookups take a reader-writer lock shared, as faults take mmap_sem in Linux 2.6.35;
 *   tree/scalable   the Bonsai tree: lookups in an RCU read-side critical section, no lock;
 *   tree/spinlock   every lookup and update takes one spinlock.
 * Parameters: vmas, the ranges in the tree (default 1000: a typical process has hundreds to thousands;
 * at least one per task), and update_percent (0 to 100, default 1).
 *
 * Layout: the address space is cut into slots of SLOT_PAGES pages, and task i owns the slots of region
 * i. Range k belongs to task k % ntasks, is 1 + k % 8 pages long (so at least 8 pages of gap follow it)
 * and its value is k. At first a task's ranges sit in every other slot of its region; the rest are free
 * places to move them to.
 */
#include "bench.h"
#include "scale/bonsai.h"

#include <errno.h>
#include <stdlib.h>
#include <urcu.h>

#define PAGE 4096ull
#define SLOT_PAGES 16
#define BASE (1ull << 32)
#define MAX_VMAS (1u << 24)

/*
 * Where range k is, published by its owner for the lookups of every task: the slot in the low 32 bits,
 * and above it a sequence that is odd while the owner moves the range. A lookup reads it before and
 * after; if it saw the same even value twice, no move overlapped the lookup (see fault()), and the
 * lookup must have found exactly range k. Otherwise it only checks that the range it found holds the
 * address.
 */
#define WHERE_SLOT(w) ((uint32_t)(w))
#define WHERE_SEQ(w) ((w) >> 32)

struct tree_bench {
	struct bonsai_tree tree;
	unsigned vmas, ntasks, slots_per_task, update_percent;
	_Atomic uint64_t *where;
};

/* A task's own: the free slots of its region (only it maps there). */
struct tree_task {
	uint64_t rng;
	unsigned nown, nfree;
	uint32_t *free_slots;
};

static uint64_t slot_addr(uint32_t slot)
{
	return BASE + (uint64_t)slot * SLOT_PAGES * PAGE;
}

static uint64_t range_len(unsigned k)
{
	return (1 + k % 8) * PAGE;
}

static int prepare_form(void *shared, unsigned ntasks, enum bonsai_sync sync)
{
	struct tree_bench *b = shared;
	long vmas = micro_param("vmas", 1000), pct = micro_param("update_percent", 1);
	int err;

	if (vmas < (long)ntasks || vmas > MAX_VMAS || pct < 0 || pct > 100)
		return EINVAL;
	b->vmas = (unsigned)vmas;
	b->ntasks = ntasks;
	b->update_percent = (unsigned)pct;
	b->slots_per_task = 2 * ((b->vmas + ntasks - 1) / ntasks);
	/* This thread builds the tree, and an update of the RCU form hands its garbage to call_rcu. */
	rcu_register_thread();
	if ((err = bonsai_init(&b->tree, sync)))
		return err;
	if (!(b->where = calloc(b->vmas, sizeof(*b->where))))
		return ENOMEM;
	for (unsigned k = 0; k < b->vmas; k++) {
		uint32_t slot = (k % ntasks) * b->slots_per_task + 2 * (k / ntasks);
		atomic_init(&b->where[k], slot);
		if ((err = bonsai_insert(&b->tree, slot_addr(slot), slot_addr(slot) + range_len(k), k)))
			return err;
	}
	return 0;
}

static int init(struct micro_task *t)
{
	struct tree_bench *b = t->shared;
	struct tree_task *s = bench_alloc(sizeof(*s));
	/*
	 * Every task reads the tree, and in the RCU form its updates call call_rcu: both need the thread
	 * registered with liburcu (harmless in the locked forms). The driver ends the process with
	 * SIGKILL, so there is no exit path to unregister on.
	 */
	rcu_register_thread();
	if (!s)
		return ENOMEM;
	s->rng = 0x9e3779b97f4a7c15ull * (t->nr + 1);
	s->nown = (b->vmas - t->nr + b->ntasks - 1) / b->ntasks;
	s->nfree = b->slots_per_task - s->nown;
	if (!(s->free_slots = calloc(s->nfree, sizeof(*s->free_slots))))
		return ENOMEM;
	uint32_t first = t->nr * b->slots_per_task;
	unsigned n = 0;
	for (uint32_t i = 0; i < b->slots_per_task; i++)
		if (i % 2 || i / 2 >= s->nown)
			s->free_slots[n++] = first + i;
	t->priv = s;
	return 0;
}

/*
 * A page fault. Why the two reads of where[k] tell whether k stayed put: the acquire load of w1 read
 * the owner's store that ended k's last move, which the owner made after publishing the tree with k at
 * that slot, so the lookup sees that tree or a later one. A later move of k starts with an odd store
 * before its munmap publishes anything; had the lookup seen any tree from that munmap on, w2 (read after
 * the lookup's acquire of the root) would see that store or a later one.
 */
static void fault(struct micro_task *t, struct tree_bench *b, uint64_t *rng)
{
	uint64_t r = bench_rand(rng);
	unsigned k = (unsigned)(r % b->vmas);
	uint64_t w1 = atomic_load_explicit(&b->where[k], memory_order_acquire);
	uint64_t start = slot_addr(WHERE_SLOT(w1)), end = start + range_len(k);
	uint64_t addr = start + (r >> 32) % (end - start);
	struct bonsai_range got;
	bool found = bonsai_lookup(&b->tree, addr, &got);
	uint64_t w2 = atomic_load_explicit(&b->where[k], memory_order_relaxed);

	if (w1 == w2 && WHERE_SEQ(w1) % 2 == 0) {
		if (!found)
			micro_fail(t, "lookup missed a mapped range", 0);
		if (got.start != start || got.end != end || got.value != k)
			micro_fail(t, "lookup returned a wrong range", 0);
	} else if (found && (addr < got.start || addr >= got.end)) {
		micro_fail(t, "lookup returned a range without the address", 0);
	}
}

/* munmap one of the task's ranges and mmap it at a free place of its region. */
static void move(struct micro_task *t, struct tree_bench *b, struct tree_task *s, uint64_t *rng)
{
	uint64_t r = bench_rand(rng);
	unsigned k = (unsigned)(r % s->nown) * b->ntasks + t->nr;
	unsigned f = (unsigned)((r >> 32) % s->nfree);
	uint64_t w = atomic_load_explicit(&b->where[k], memory_order_relaxed), v = 0;
	uint32_t from = WHERE_SLOT(w), to = s->free_slots[f];

	/* Odd before the munmap publishes a tree without k: the munmap's release store orders it. */
	atomic_store_explicit(&b->where[k], (WHERE_SEQ(w) + 1) << 32 | from, memory_order_relaxed);
	if (bonsai_remove(&b->tree, slot_addr(from), &v) || v != k)
		micro_fail(t, "munmap of the task's own range failed", 0);
	int err = bonsai_insert(&b->tree, slot_addr(to), slot_addr(to) + range_len(k), k);
	if (err)
		micro_fail(t, "mmap into the task's own free slot failed", err);
	/* Release: a lookup that reads this sees the tree with k at its new place. */
	atomic_store_explicit(&b->where[k], (WHERE_SEQ(w) + 2) << 32 | to, memory_order_release);
	s->free_slots[f] = from;
}

static void run(struct micro_task *t)
{
	struct tree_bench *b = t->shared;
	struct tree_task *s = t->priv;
	uint64_t rng = s->rng;
	for (;;) {
		if (b->update_percent && bench_rand(&rng) % 100 < b->update_percent)
			move(t, b, s, &rng);
		else
			fault(t, b, &rng);
		micro_count(t);
	}
}

#define TREE_BENCH(id, form, sync, what)                                                                 \
	static int prepare_##id(void *shared, const char *workdir, unsigned ntasks)                      \
	{                                                                                                \
		(void)workdir;                                                                           \
		return prepare_form(shared, ntasks, sync);                                               \
	}                                                                                                \
	MICRO_TEST_NAMED(id, "tree/" form, .description = what, .shared_size = sizeof(struct tree_bench), \
			 .threads_only = true, .prepare = prepare_##id, .init = init, .run = run)

TREE_BENCH(tree_stock, "stock", BONSAI_RWLOCK, "VMA tree under a reader-writer lock (mmap_sem)");
TREE_BENCH(tree_scalable, "scalable", BONSAI_RCU, "Bonsai tree: lookups under RCU, no lock");
TREE_BENCH(tree_spinlock, "spinlock", BONSAI_SPINLOCK, "VMA tree under one spinlock");
