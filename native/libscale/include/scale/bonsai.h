/*
 * scale/bonsai.h - a tree of address ranges whose lookups take no lock: the Bonsai tree of "Scalable
 * address spaces using RCU balanced trees" (Clements, Kaashoek, Zeldovich, ASPLOS 2012), the talk's
 * insight 2, "avoiding read locks".
 *
 * The tree maps disjoint ranges [start, end) to values, as a process's VMA tree does: bonsai_find(addr)
 * is the page fault's find_vma, bonsai_insert is mmap into a free gap, bonsai_remove(start) is munmap.
 * In Linux 2.6.35 every page fault takes mmap_sem for reading, and a reader-writer lock's read side
 * still writes the lock's word: faults of all cores serialise on that line although none of them
 * changes the tree. Bonsai's readers write nothing shared.
 *
 * Technique: the tree is balanced by weight (Adams' weight-balanced trees, with Hirai and Yamamoto's
 * parameters, see BONSAI_DELTA) and never changed in place. An update copies the nodes on its path
 * (and those its rotations touch), builds the new subtree from the copies and the untouched subtrees,
 * and publishes it with one release store of the root. A reader loads the root with acquire and the
 * child pointers with consume, so it sees either the old tree or the new one, whole. Rotations are
 * copies too, so a reader never meets a node in the middle of one. Weight balance suits path copying:
 * the balance test needs only the subtree sizes, which every copied node recomputes anyway, and a
 * rebalance is at most one (single or double) rotation per level on the way back up, built from new
 * nodes, so nothing needs parent pointers or a change in place.
 *
 * A replaced node may still be under a reader, so it is freed only after an RCU grace period
 * (liburcu, default flavour). Writers serialise on a mutex.
 *
 * The same tree, same code, in three forms (enum bonsai_sync), for comparison:
 *   BONSAI_RCU       lookups in an RCU read-side critical section, writers under a mutex (Bonsai);
 *   BONSAI_RWLOCK    lookups take a reader-writer lock shared, updates exclusive (the stock kernel's
 *                    mmap_sem);
 *   BONSAI_SPINLOCK  every lookup and update takes one spinlock (scale_spinlock: test-and-test-and-set;
 *                    a ticket lock, Linux's of 2010, hands the lock on in arrival order, and in user
 *                    space, with more threads than CPUs, a preempted waiter then stalls everyone).
 * In the locked forms a replaced node is freed as soon as the update has dropped the lock.
 *
 * Concurrency: any number of lookups and updates may run at once, in any form. In the RCU form every
 * thread that calls any function of a tree (lookups call rcu_read_lock, updates call_rcu) must be
 * registered with liburcu (rcu_register_thread), and a node from bonsai_find may be used only until
 * bonsai_read_unlock. No update may be called between bonsai_read_lock and bonsai_read_unlock (in the
 * locked forms it would deadlock; in the RCU form its fallback synchronize_rcu would). bonsai_destroy
 * is called once nothing else uses the tree.
 * Costs: 64 bytes a node; an update allocates O(log n) nodes and frees as many, later.
 */
#ifndef SCALE_BONSAI_H
#define SCALE_BONSAI_H

#include "scale/cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Balance (Adams): with weight(t) = size(t) + 1, every node has
 *     weight(left) <= BONSAI_DELTA * weight(right)  and  weight(right) <= BONSAI_DELTA * weight(left).
 * When an insert or remove breaks this at a node, one rotation restores it: a single one when the heavy
 * child's inner grandchild weighs less than BONSAI_GAMMA times its outer one, else a double one.
 * (3, 2) is the only integer pair proved to keep the rule through both inserts and removes (Hirai and
 * Yamamoto, "Balancing weight-balanced trees", JFP 2011). The tests check the rule at every node after
 * every update.
 */
#define BONSAI_DELTA 3
#define BONSAI_GAMMA 2

/* A node's magic while it is in a tree or may still be read, and once it has been freed. */
#define BONSAI_LIVE 0xb0a5a11eu
#define BONSAI_DEAD 0xdeadb0a5u

enum bonsai_sync { BONSAI_RCU, BONSAI_RWLOCK, BONSAI_SPINLOCK };

/*
 * Immutable once published, but for chain, which the update that replaces the node writes while
 * readers may still use it (they never read chain, or gen), and magic, poisoned once no reader can.
 * Readers use start, end, value and the children; the tests' readers also check magic.
 */
struct bonsai_node {
	uint64_t start, end;			/* the range [start, end) */
	_Atomic(struct bonsai_node *) left, right;
	uint64_t value;
	uint32_t size;				/* nodes in this subtree */
	uint32_t magic;				/* BONSAI_LIVE, or BONSAI_DEAD just before free */
	uint64_t gen;				/* the update that made this node (writers only) */
	struct bonsai_node *chain;		/* the next node an update made or replaced (writers only) */
};

struct bonsai_tree {
	/* Read by every lookup, written by every update: on a line of its own, away from the locks. */
	SCALE_ALIGNED _Atomic(struct bonsai_node *) root;
	enum bonsai_sync sync;
	/* Each lock on its own line: in the locked forms, the line every lookup writes. */
	SCALE_ALIGNED pthread_rwlock_t rwlock;	/* BONSAI_RWLOCK */
	SCALE_ALIGNED struct scale_spinlock spin;	/* BONSAI_SPINLOCK */
	SCALE_ALIGNED pthread_mutex_t writer;	/* BONSAI_RCU: writers only */
	uint64_t gen;				/* updates so far; under the writers' lock */
	_Atomic long batches;			/* BONSAI_RCU: handed to call_rcu, not yet freed */
};

/* A copy of one range, for callers that do not keep the read side open. */
struct bonsai_range {
	uint64_t start, end, value;
};

/* Returns 0 or the error of pthread_*_init. */
int bonsai_init(struct bonsai_tree *t, enum bonsai_sync sync);
/* Frees every node, after waiting for those still waiting for a grace period. */
void bonsai_destroy(struct bonsai_tree *t);

/*
 * Maps [start, end) to value. Returns 0; EINVAL if start >= end; EEXIST if the range overlaps one in
 * the tree; ENOMEM if out of memory or nodes (the tree is unchanged then).
 */
int bonsai_insert(struct bonsai_tree *t, uint64_t start, uint64_t end, uint64_t value);
/*
 * Unmaps the range that starts at start, storing its value in *value if value is not NULL. Returns 0;
 * ENOENT if no range starts there; ENOMEM if the copies could not be made (the tree is unchanged).
 */
int bonsai_remove(struct bonsai_tree *t, uint64_t start, uint64_t *value);

/*
 * The read side: an RCU read-side critical section, the read lock, or the spinlock, by form. Between
 * the two, bonsai_find returns the node whose range contains addr, or NULL.
 */
void bonsai_read_lock(struct bonsai_tree *t);
void bonsai_read_unlock(struct bonsai_tree *t);
struct bonsai_node *bonsai_find(struct bonsai_tree *t, uint64_t addr);

/* The three above in one: copies the range that contains addr into *r and returns true, or false. */
bool bonsai_lookup(struct bonsai_tree *t, uint64_t addr, struct bonsai_range *r);

/* Ranges in the tree. */
size_t bonsai_count(struct bonsai_tree *t);

/* A node's children, for walks on the read side (consume: see bonsai.c). */
static inline struct bonsai_node *bonsai_left(struct bonsai_node *n)
{
	return atomic_load_explicit(&n->left, memory_order_consume);
}

static inline struct bonsai_node *bonsai_right(struct bonsai_node *n)
{
	return atomic_load_explicit(&n->right, memory_order_consume);
}

#endif
