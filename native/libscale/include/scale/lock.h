/*
 * scale/lock.h - the locks of "Non-scalable locks are dangerous" (Boyd-Wickizer et al., 2012) behind one
 * interface: a ticket spinlock (Linux's spinlock of 2010, the non-scalable kind), an MCS queue lock (the
 * scalable kind) and pthread_mutex (the baseline an application would reach for).
 *
 * Why the ticket lock collapses: every waiter spins on the one word that holds the lock's owner. Each
 * release writes it, invalidating the line in every waiter's cache, and the next owner's read queues
 * behind theirs, so a handoff costs time proportional to the number of waiters. MCS waiters each spin
 * on their own node; a release writes only the next waiter's node, a constant cost. The price of MCS
 * is a queue node per acquisition, passed to unlock, and an extra atomic when uncontended.
 */
#ifndef SCALE_LOCK_H
#define SCALE_LOCK_H

#include "scale/cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct ticket_lock {
	_Atomic uint32_t next;	/* the ticket the next arrival draws */
	_Atomic uint32_t owner;	/* the ticket now allowed in */
};

#define TICKET_LOCK_INITIALIZER { 0, 0 }

static inline void ticket_lock_lock(struct ticket_lock *l)
{
	uint32_t me = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);

	/* Acquire: nothing of the critical section may be read before our turn has come. */
	while (atomic_load_explicit(&l->owner, memory_order_acquire) != me)
		scale_cpu_relax();
}

static inline void ticket_lock_unlock(struct ticket_lock *l)
{
	/* Only the holder writes owner, so a load and a store suffice; release publishes our writes. */
	uint32_t now = atomic_load_explicit(&l->owner, memory_order_relaxed);
	atomic_store_explicit(&l->owner, now + 1, memory_order_release);
}

struct mcs_node {
	SCALE_ALIGNED _Atomic(struct mcs_node *) next;
	atomic_bool waiting;
};

struct mcs_lock {
	_Atomic(struct mcs_node *) tail;
};

#define MCS_LOCK_INITIALIZER { NULL }

static inline void mcs_lock_lock(struct mcs_lock *l, struct mcs_node *me)
{
	atomic_store_explicit(&me->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&me->waiting, true, memory_order_relaxed);
	/* acq_rel: release our node's initialisation to the predecessor; acquire the lock if it was free. */
	struct mcs_node *prev = atomic_exchange_explicit(&l->tail, me, memory_order_acq_rel);
	if (!prev)
		return;
	atomic_store_explicit(&prev->next, me, memory_order_release);
	/* Acquire pairs with the predecessor's release in unlock: its critical section happened before. */
	while (atomic_load_explicit(&me->waiting, memory_order_acquire))
		scale_cpu_relax();
}

static inline void mcs_lock_unlock(struct mcs_lock *l, struct mcs_node *me)
{
	struct mcs_node *next = atomic_load_explicit(&me->next, memory_order_acquire);

	if (!next) {
		struct mcs_node *expected = me;
		/* Release: a later acquirer that finds the lock free must see our critical section. */
		if (atomic_compare_exchange_strong_explicit(&l->tail, &expected, NULL, memory_order_release,
							    memory_order_relaxed))
			return;
		/* A successor swapped itself in but has not linked to us yet: wait for the link. */
		while (!(next = atomic_load_explicit(&me->next, memory_order_acquire)))
			scale_cpu_relax();
	}
	atomic_store_explicit(&next->waiting, false, memory_order_release);
}

/*
 * One interface over every lock, so a benchmark or a test is written once. node is the caller's
 * per-acquisition scratch (an MCS queue node), node_size bytes, SCALE_LINE aligned; unused by locks
 * that need none.
 */
struct scale_lock_ops {
	const char *name;
	size_t size;		/* bytes of the lock itself */
	size_t node_size;
	int (*init)(void *lock);
	void (*destroy)(void *lock);
	void (*lock)(void *lock, void *node);
	void (*unlock)(void *lock, void *node);
};

extern const struct scale_lock_ops scale_ticket_lock_ops;
extern const struct scale_lock_ops scale_mcs_lock_ops;
extern const struct scale_lock_ops scale_mutex_lock_ops;

/* NULL-terminated list of the above, for tests and benchmarks that go through all of them. */
extern const struct scale_lock_ops *const scale_lock_kinds[];

const struct scale_lock_ops *scale_lock_find(const char *name);

#endif
