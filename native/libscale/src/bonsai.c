#include "scale/bonsai.h"

/*
 * liburcu's default flavour, called through the library rather than inlined (no _LGPL_SOURCE): the
 * read side costs a call more, and liburcu's own accesses stay out of the code the sanitizers
 * instrument, so the only RCU ordering they are told about is the one annotated below.
 */
#include <urcu.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

/* size is 32 bits: the tree refuses the insert that would overflow it (mmap's ENOMEM at map_count). */
#define BONSAI_MAX_NODES (UINT32_MAX - 1)

_Static_assert(sizeof(struct bonsai_node) == 64, "a node is one cache line's worth");

/*
 * ThreadSanitizer cannot see an RCU grace period: liburcu's readers announce themselves with volatile
 * stores and compiler barriers, its writers wait with membarrier and volatile loads, all inside the
 * uninstrumented library. So a reader's last load from a node and the free of that node after the
 * grace period look unordered to TSan, and it would report them as a race although synchronize_rcu
 * orders them. We tell it the ordering that RCU guarantees, and nothing more:
 *   - a reader releases `grace_period` just before rcu_read_unlock: everything it read in its critical
 *     section is before that point;
 *   - whoever frees replaced nodes acquires `grace_period` after a grace period has ended: every
 *     critical section that could still hold those nodes ended before the grace period did, so its
 *     release is already in the sync object (sections that began later cannot reach the nodes, which
 *     were unlinked before the grace period began, and hold no claim on them);
 *   - call_rcu hands a batch to liburcu's worker thread through a lock-free queue TSan cannot see
 *     either: the writer releases the batch before call_rcu, the callback acquires it.
 * Nothing else is annotated: publication (release store of the root, acquire/consume loads) is plain
 * C11 and TSan checks it as it is.
 */
#include "tsan.h"

static char grace_period;	/* TSan's sync object for "a grace period has passed", see above */

/*
 * Reclamation in the RCU form. An update does not wait for a grace period: it hands the chain of nodes
 * it replaced to call_rcu in one small batch, and returns. liburcu's call_rcu worker takes everything
 * queued since its last round, waits out one grace period (synchronize_rcu: a membarrier that
 * interrupts every CPU running our threads, then a wait for readers in critical sections), frees it
 * all, and sleeps 10 ms before the next round. So one grace period is paid per round, by a thread that
 * is not a writer, for however many updates came in those 10 ms. We chose call_rcu over collecting
 * batches ourselves and calling synchronize_rcu every N updates because that would still stall one
 * update in N for a whole grace period (as long as the slowest reader's critical section), while
 * call_rcu takes the wait off the update path entirely: an update pays a malloc and an enqueue. The
 * cost is memory: replaced nodes live about 10 ms longer.
 */
struct bonsai_batch {
	struct rcu_head rcu;
	struct bonsai_tree *t;
	struct bonsai_node *nodes;	/* chained through chain */
};

static void free_nodes(struct bonsai_node *n)
{
	while (n) {
		struct bonsai_node *next = n->chain;
		/* Poison first: a reader that still held the node would see BONSAI_DEAD, if the allocator
		 * has not reused the memory yet (and under ASan would be reported anyway). */
		n->magic = BONSAI_DEAD;
		free(n);
		n = next;
	}
}

static void free_batch(struct rcu_head *head)
{
	struct bonsai_batch *b = caa_container_of(head, struct bonsai_batch, rcu);
	tsan_acquire(b);
	tsan_acquire(&grace_period);
	struct bonsai_tree *t = b->t;
	free_nodes(b->nodes);
	free(b);
	/* Release: bonsai_destroy may free the tree once it reads 0, so this is our last touch of it. */
	atomic_fetch_sub_explicit(&t->batches, 1, memory_order_release);
}

/* After the update has published its tree and dropped the writers' lock. */
static void reclaim(struct bonsai_tree *t, struct bonsai_node *replaced)
{
	if (!replaced)
		return;
	if (t->sync != BONSAI_RCU) {
		/* The lock excluded every reader while the root changed; any later one sees the new tree. */
		free_nodes(replaced);
		return;
	}
	struct bonsai_batch *b = malloc(sizeof(*b));
	if (!b) {
		/* No memory for a batch: wait the grace period out here instead, as kfree_rcu does. */
		synchronize_rcu();
		tsan_acquire(&grace_period);
		free_nodes(replaced);
		return;
	}
	b->t = t;
	b->nodes = replaced;
	atomic_fetch_add_explicit(&t->batches, 1, memory_order_relaxed);
	tsan_release(b);
	call_rcu(&b->rcu, free_batch);
}

int bonsai_init(struct bonsai_tree *t, enum bonsai_sync sync)
{
	pthread_rwlockattr_t attr;
	int err;

	atomic_init(&t->root, NULL);
	t->sync = sync;
	t->gen = 0;
	atomic_init(&t->batches, 0);
	t->spin = (struct scale_spinlock)SCALE_SPINLOCK_INITIALIZER;
	/*
	 * glibc's default rwlock lets readers in while a writer waits, so a steady stream of lookups
	 * starves updates. mmap_sem (an rwsem) queues new readers behind a waiting writer; this kind
	 * does the same.
	 */
	if ((err = pthread_rwlockattr_init(&attr)))
		return err;
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	err = pthread_rwlock_init(&t->rwlock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (err)
		return err;
	if ((err = pthread_mutex_init(&t->writer, NULL))) {
		pthread_rwlock_destroy(&t->rwlock);
		return err;
	}
	return 0;
}

static void free_tree(struct bonsai_node *n)
{
	while (n) {
		struct bonsai_node *r = atomic_load_explicit(&n->right, memory_order_relaxed);
		free_tree(atomic_load_explicit(&n->left, memory_order_relaxed));
		n->magic = BONSAI_DEAD;
		free(n);
		n = r;
	}
}

void bonsai_destroy(struct bonsai_tree *t)
{
	/*
	 * Replaced nodes may still sit in call_rcu's queue: wait until their callbacks have run. Not with
	 * rcu_barrier, which would wait too (for every callback in the process): it hands allocations of
	 * its own to liburcu's worker thread through the library's uninstrumented atomics, and TSan then
	 * reports their free there as a race, inside liburcu, where we cannot annotate it. A count of this
	 * tree's batches is C11 atomics that TSan sees, and waits for this tree alone. The worker runs a
	 * round every 10 ms, so a short sleep is all the waiting needs.
	 */
	while (atomic_load_explicit(&t->batches, memory_order_acquire))
		nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = 1000000 }, NULL);
	free_tree(atomic_load_explicit(&t->root, memory_order_relaxed));
	atomic_store_explicit(&t->root, NULL, memory_order_relaxed);
	pthread_mutex_destroy(&t->writer);
	pthread_rwlock_destroy(&t->rwlock);
}

/* The read side. */

void bonsai_read_lock(struct bonsai_tree *t)
{
	switch (t->sync) {
	case BONSAI_RCU:
		rcu_read_lock();
		break;
	case BONSAI_RWLOCK:
		pthread_rwlock_rdlock(&t->rwlock);
		break;
	case BONSAI_SPINLOCK:
		scale_spin_lock(&t->spin);
		break;
	}
}

void bonsai_read_unlock(struct bonsai_tree *t)
{
	switch (t->sync) {
	case BONSAI_RCU:
		tsan_release(&grace_period);
		rcu_read_unlock();
		break;
	case BONSAI_RWLOCK:
		pthread_rwlock_unlock(&t->rwlock);
		break;
	case BONSAI_SPINLOCK:
		scale_spin_unlock(&t->spin);
		break;
	}
}

struct bonsai_node *bonsai_find(struct bonsai_tree *t, uint64_t addr)
{
	/*
	 * Acquire pairs with the update's release store of the root: every node reachable from this root
	 * was written before it (updates are serialised, and each one writes only nodes it made). The
	 * child loads are consume, as the kernel's rcu_dereference: the acquire above already orders
	 * them, but consume states the dependency. Compilers promote consume to acquire, which costs
	 * nothing on x86 (a plain load).
	 */
	struct bonsai_node *n = atomic_load_explicit(&t->root, memory_order_acquire);
	while (n && (addr < n->start || addr >= n->end))
		n = addr < n->start ? bonsai_left(n) : bonsai_right(n);
	return n;
}

bool bonsai_lookup(struct bonsai_tree *t, uint64_t addr, struct bonsai_range *r)
{
	bonsai_read_lock(t);
	struct bonsai_node *n = bonsai_find(t, addr);
	if (n)
		*r = (struct bonsai_range){ .start = n->start, .end = n->end, .value = n->value };
	bonsai_read_unlock(t);
	return n != NULL;
}

size_t bonsai_count(struct bonsai_tree *t)
{
	bonsai_read_lock(t);
	struct bonsai_node *root = atomic_load_explicit(&t->root, memory_order_acquire);
	size_t n = root ? root->size : 0;
	bonsai_read_unlock(t);
	return n;
}

/* The write side: path copying. Everything below runs under the writers' lock. */

static void write_lock(struct bonsai_tree *t)
{
	switch (t->sync) {
	case BONSAI_RCU:
		pthread_mutex_lock(&t->writer);
		break;
	case BONSAI_RWLOCK:
		pthread_rwlock_wrlock(&t->rwlock);
		break;
	case BONSAI_SPINLOCK:
		scale_spin_lock(&t->spin);
		break;
	}
}

static void write_unlock(struct bonsai_tree *t)
{
	switch (t->sync) {
	case BONSAI_RCU:
		pthread_mutex_unlock(&t->writer);
		break;
	case BONSAI_RWLOCK:
		pthread_rwlock_unlock(&t->rwlock);
		break;
	case BONSAI_SPINLOCK:
		scale_spin_unlock(&t->spin);
		break;
	}
}

/*
 * One update. Nodes it made (gen == this update's) are invisible until the root is published, so it
 * may change them in place; published nodes it must copy, and then it has replaced them. If an
 * allocation fails half-way, nothing has been published: the update frees what it made and forgets
 * what it meant to replace.
 */
struct update {
	uint64_t gen;
	struct bonsai_node *made;	/* chained through chain */
	struct bonsai_node *replaced;	/* chained through chain */
	bool failed;
};

/* The writer's own loads: it holds the lock, so it sees every update's stores without ordering. */
static struct bonsai_node *left_of(struct bonsai_node *n)
{
	return atomic_load_explicit(&n->left, memory_order_relaxed);
}

static struct bonsai_node *right_of(struct bonsai_node *n)
{
	return atomic_load_explicit(&n->right, memory_order_relaxed);
}

static uint64_t weight(const struct bonsai_node *n)
{
	return n ? (uint64_t)n->size + 1 : 1;
}

static struct bonsai_node *make(struct update *u, uint64_t start, uint64_t end, uint64_t value)
{
	struct bonsai_node *n = malloc(sizeof(*n));
	if (!n) {
		u->failed = true;
		return NULL;
	}
	n->start = start;
	n->end = end;
	n->value = value;
	atomic_init(&n->left, NULL);
	atomic_init(&n->right, NULL);
	n->size = 1;
	n->magic = BONSAI_LIVE;
	n->gen = u->gen;
	n->chain = u->made;
	u->made = n;
	return n;
}

/*
 * The node with k's range and value and the children l and r: k itself if this update made it, else a
 * copy of k (k is then replaced). The stores need no ordering: the root's release store publishes them.
 */
static struct bonsai_node *cow(struct update *u, struct bonsai_node *k, struct bonsai_node *l,
			       struct bonsai_node *r)
{
	struct bonsai_node *n = k;
	if (u->failed)
		return NULL;
	if (k->gen != u->gen) {
		if (!(n = make(u, k->start, k->end, k->value)))
			return NULL;
		k->chain = u->replaced;
		u->replaced = k;
	}
	atomic_store_explicit(&n->left, l, memory_order_relaxed);
	atomic_store_explicit(&n->right, r, memory_order_relaxed);
	n->size = (uint32_t)(weight(l) + weight(r) - 1);
	return n;
}

/*
 * k's range with children l and r, where l and r were balanced before one insert or remove in one of
 * them: at most one rotation (Adams' balance; the parameters are explained in bonsai.h).
 */
static struct bonsai_node *balance(struct update *u, struct bonsai_node *k, struct bonsai_node *l,
				   struct bonsai_node *r)
{
	uint64_t wl = weight(l), wr = weight(r);

	if (wr > BONSAI_DELTA * wl) {
		struct bonsai_node *rl = left_of(r), *rr = right_of(r);
		if (weight(rl) < BONSAI_GAMMA * weight(rr)) {
			/* Single rotation left: r rises, k takes r's inner subtree. */
			struct bonsai_node *nk = cow(u, k, l, rl);
			return cow(u, r, nk, rr);
		}
		/* Double: rl rises, k and r share its subtrees. */
		struct bonsai_node *rll = left_of(rl), *rlr = right_of(rl);
		struct bonsai_node *nk = cow(u, k, l, rll);
		struct bonsai_node *nr = cow(u, r, rlr, rr);
		return cow(u, rl, nk, nr);
	}
	if (wl > BONSAI_DELTA * wr) {
		struct bonsai_node *ll = left_of(l), *lr = right_of(l);
		if (weight(lr) < BONSAI_GAMMA * weight(ll)) {
			struct bonsai_node *nk = cow(u, k, lr, r);
			return cow(u, l, ll, nk);
		}
		struct bonsai_node *lrl = left_of(lr), *lrr = right_of(lr);
		struct bonsai_node *nl = cow(u, l, ll, lrl);
		struct bonsai_node *nk = cow(u, k, lrr, r);
		return cow(u, lr, nl, nk);
	}
	return cow(u, k, l, r);
}

/* The new subtree of n with leaf added; the caller checked that leaf overlaps nothing. */
static struct bonsai_node *tree_insert(struct update *u, struct bonsai_node *n, struct bonsai_node *leaf)
{
	if (!n)
		return leaf;
	if (leaf->start < n->start) {
		struct bonsai_node *l = tree_insert(u, left_of(n), leaf);
		return u->failed ? NULL : balance(u, n, l, right_of(n));
	}
	struct bonsai_node *r = tree_insert(u, right_of(n), leaf);
	return u->failed ? NULL : balance(u, n, left_of(n), r);
}

/* The subtree n without its leftmost node, which goes to *min (still published: the caller copies it). */
static struct bonsai_node *remove_min(struct update *u, struct bonsai_node *n, struct bonsai_node **min)
{
	struct bonsai_node *l = left_of(n);
	if (!l) {
		*min = n;
		return right_of(n);
	}
	l = remove_min(u, l, min);
	return u->failed ? NULL : balance(u, n, l, right_of(n));
}

static struct bonsai_node *remove_max(struct update *u, struct bonsai_node *n, struct bonsai_node **max)
{
	struct bonsai_node *r = right_of(n);
	if (!r) {
		*max = n;
		return left_of(n);
	}
	r = remove_max(u, r, max);
	return u->failed ? NULL : balance(u, n, left_of(n), r);
}

/* One tree of the subtrees l and r of a removed node: its neighbour from the heavier side takes its place. */
static struct bonsai_node *glue(struct update *u, struct bonsai_node *l, struct bonsai_node *r)
{
	struct bonsai_node *m;
	if (!l)
		return r;
	if (!r)
		return l;
	if (weight(l) > weight(r)) {
		l = remove_max(u, l, &m);
		return u->failed ? NULL : balance(u, m, l, r);
	}
	r = remove_min(u, r, &m);
	return u->failed ? NULL : balance(u, m, l, r);
}

/* The new subtree of n without the node that starts at start; the caller checked it is there. */
static struct bonsai_node *tree_remove(struct update *u, struct bonsai_node *n, uint64_t start)
{
	if (start < n->start) {
		struct bonsai_node *l = tree_remove(u, left_of(n), start);
		return u->failed ? NULL : balance(u, n, l, right_of(n));
	}
	if (start > n->start) {
		struct bonsai_node *r = tree_remove(u, right_of(n), start);
		return u->failed ? NULL : balance(u, n, left_of(n), r);
	}
	n->chain = u->replaced;
	u->replaced = n;
	return glue(u, left_of(n), right_of(n));
}

static void begin(struct bonsai_tree *t, struct update *u)
{
	*u = (struct update){ .gen = ++t->gen, .made = NULL, .replaced = NULL, .failed = false };
}

/* Publishes root, or on failure undoes the update. Returns 0 or ENOMEM. */
static int commit(struct bonsai_tree *t, struct update *u, struct bonsai_node *root)
{
	if (u->failed) {
		free_nodes(u->made);
		u->replaced = NULL;
		return ENOMEM;
	}
	/* Release: the new nodes' fields are written before any reader can reach them. */
	atomic_store_explicit(&t->root, root, memory_order_release);
	return 0;
}

int bonsai_insert(struct bonsai_tree *t, uint64_t start, uint64_t end, uint64_t value)
{
	struct update u;
	int err = 0;

	if (start >= end)
		return EINVAL;
	write_lock(t);
	begin(t, &u);
	struct bonsai_node *root = atomic_load_explicit(&t->root, memory_order_relaxed);
	/* A free gap? Its neighbours are on the path down, so checking the path is enough. */
	for (struct bonsai_node *n = root; n;) {
		if (end <= n->start) {
			n = left_of(n);
		} else if (start >= n->end) {
			n = right_of(n);
		} else {
			err = EEXIST;
			break;
		}
	}
	if (!err && root && root->size >= BONSAI_MAX_NODES)
		err = ENOMEM;
	if (!err) {
		struct bonsai_node *leaf = make(&u, start, end, value);
		err = commit(t, &u, leaf ? tree_insert(&u, root, leaf) : NULL);
	}
	write_unlock(t);
	reclaim(t, u.replaced);
	return err;
}

int bonsai_remove(struct bonsai_tree *t, uint64_t start, uint64_t *value)
{
	struct update u;
	int err = ENOENT;

	write_lock(t);
	begin(t, &u);
	struct bonsai_node *root = atomic_load_explicit(&t->root, memory_order_relaxed), *n = root;
	while (n && n->start != start)
		n = start < n->start ? left_of(n) : right_of(n);
	if (n) {
		uint64_t v = n->value;
		if (!(err = commit(t, &u, tree_remove(&u, root, start))) && value)
			*value = v;
	}
	write_unlock(t);
	reclaim(t, u.replaced);
	return err;
}
