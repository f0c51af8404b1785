/*
 * scale/counter.h - reference counters: the stock shared counter, the paper's sloppy counter (OSDI 2010,
 * section 4.3) and a per-core approximate counter in the style of Linux's percpu_counter.
 *
 * Costs, read before choosing:
 *   shared_counter  one word; every update is an atomic on one cache line that all cores fight over.
 *   sloppy_counter  a central counter plus one line per CPU slot (SCALE_LINE x CPUs of memory). An
 *                   update usually touches only the local slot. Knowing the exact number of references
 *                   in use means reading every slot: sloppy_counter_in_use and sloppy_counter_reconcile
 *                   are O(CPUs) and meant for rare moments, such as deciding whether an object can go.
 *   pcpu_counter    a central count plus a per-slot delta folded in once it reaches +-batch. The cheap
 *                   read is approximate (off by less than batch x slots); pcpu_counter_sum is exact when
 *                   quiescent and O(CPUs).
 *
 * Concurrency: every operation may run concurrently with every other. Exact reads (in_use, sum) are
 * exact only when no update runs at the same time; under updates they are a sample.
 */
#ifndef SCALE_COUNTER_H
#define SCALE_COUNTER_H

#include "scale/cpu.h"

#include <stdatomic.h>
#include <stddef.h>

struct shared_counter {
	SCALE_ALIGNED _Atomic long value;
};

static inline void shared_counter_add(struct shared_counter *c, long v)
{
	/* Relaxed: a count orders nothing by itself (as atomic_inc on a kernel refcount). */
	atomic_fetch_add_explicit(&c->value, v, memory_order_relaxed);
}

static inline long shared_counter_read(struct shared_counter *c)
{
	return atomic_load_explicit(&c->value, memory_order_relaxed);
}

struct sloppy_slot {
	SCALE_ALIGNED _Atomic long spare;	/* spare references held by this CPU slot */
};

/*
 * Invariant (when no update is half done): central == sum of every slot's spare + references in use.
 * An increment takes references from the local spares if there are enough, else from central; a
 * decrement returns them to the local spares; spares above threshold go back to central (down to half
 * the threshold, so a core hovering at the threshold does not touch central on every decrement).
 */
/*
 * The fields every increment and decrement reads come first; central, written whenever a slot runs
 * dry or overflows, has a line of its own, so those writes do not evict the read-mostly line from
 * every other core (the layout falseshare.h measures).
 */
struct sloppy_counter {
	long threshold;
	unsigned nr_slots;
	struct sloppy_slot *slots;
	SCALE_ALIGNED _Atomic long central;
};
_Static_assert(offsetof(struct sloppy_counter, central) / SCALE_LINE !=
		       offsetof(struct sloppy_counter, slots) / SCALE_LINE,
	       "central must not share a line with the read-mostly fields");

/* Returns 0 or ENOMEM. threshold >= 1: spare references a slot may keep. */
int sloppy_counter_init(struct sloppy_counter *c, long initial, long threshold);
void sloppy_counter_destroy(struct sloppy_counter *c);

static inline void sloppy_counter_inc(struct sloppy_counter *c, long v)
{
	struct sloppy_slot *s = &c->slots[scale_slot(c->nr_slots)];
	long spare = atomic_load_explicit(&s->spare, memory_order_relaxed);

	/* A CAS, not a plain store: a thread migrated onto this slot may be using it at the same time. */
	while (spare >= v)
		if (atomic_compare_exchange_weak_explicit(&s->spare, &spare, spare - v, memory_order_relaxed,
							  memory_order_relaxed))
			return;
	atomic_fetch_add_explicit(&c->central, v, memory_order_relaxed);
}

void sloppy_counter_release_spares(struct sloppy_counter *c, struct sloppy_slot *s, long spare);

static inline void sloppy_counter_dec(struct sloppy_counter *c, long v)
{
	struct sloppy_slot *s = &c->slots[scale_slot(c->nr_slots)];
	long spare = atomic_fetch_add_explicit(&s->spare, v, memory_order_relaxed) + v;

	if (spare > c->threshold)
		sloppy_counter_release_spares(c, s, spare);
}

/* The exact number of references in use (central minus all spares): O(CPUs). */
long sloppy_counter_in_use(struct sloppy_counter *c);
/* Returns every spare to central, so central alone is the count in use; returns it. O(CPUs). */
long sloppy_counter_reconcile(struct sloppy_counter *c);
/* The central counter and the sum of spares, for checking the invariant in tests. */
long sloppy_counter_central(struct sloppy_counter *c);
long sloppy_counter_spares(struct sloppy_counter *c);

struct pcpu_slot {
	SCALE_ALIGNED _Atomic long delta;
};

/* Read-mostly fields first, the shared count on a line of its own (see struct sloppy_counter). */
struct pcpu_counter {
	long batch;
	unsigned nr_slots;
	struct pcpu_slot *slots;
	SCALE_ALIGNED _Atomic long count;
};
_Static_assert(offsetof(struct pcpu_counter, count) / SCALE_LINE != offsetof(struct pcpu_counter, slots) / SCALE_LINE,
	       "count must not share a line with the read-mostly fields");

/* batch <= 0 picks Linux's default: max(32, 2 x CPUs). Returns 0 or ENOMEM. */
int pcpu_counter_init(struct pcpu_counter *c, long initial, long batch);
void pcpu_counter_destroy(struct pcpu_counter *c);

static inline void pcpu_counter_add(struct pcpu_counter *c, long v)
{
	struct pcpu_slot *s = &c->slots[scale_slot(c->nr_slots)];
	long d = atomic_fetch_add_explicit(&s->delta, v, memory_order_relaxed) + v;

	if (d >= c->batch || d <= -c->batch) {
		/* Exchange, so a migrated thread folding the same slot cannot fold it twice. */
		long moved = atomic_exchange_explicit(&s->delta, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->count, moved, memory_order_relaxed);
	}
}

/* Approximate: off by less than batch x slots. */
static inline long pcpu_counter_read(struct pcpu_counter *c)
{
	return atomic_load_explicit(&c->count, memory_order_relaxed);
}

/* Exact when quiescent: O(CPUs). */
long pcpu_counter_sum(struct pcpu_counter *c);

#endif
