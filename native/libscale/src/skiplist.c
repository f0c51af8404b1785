#include "scale/skiplist.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <urcu.h>

/*
 * A next pointer's bit 0 marks its node as deleted at that level (nodes come from malloc, so the bit is
 * free). Once set, the word never changes again: that is what lets a search unlink the node with a
 * single CAS on the predecessor, knowing the successor it copies is final.
 */
#define MARK ((uintptr_t)1)

struct skiplist_node {
	uint64_t key, value;		/* immutable once linked */
	struct rcu_head rcu;
	_Atomic unsigned owners;	/* the inserter until it is done linking, and the list until deleted */
	unsigned height;
	_Atomic uintptr_t next[];	/* height words */
};

/*
 * ThreadSanitizer cannot see liburcu's grace periods (its accesses are uninstrumented volatiles and
 * membarrier), so to it the free after a grace period races with every lookup that read the node. The
 * happens-before RCU provides is: a read-side critical section that could reach the node ends before
 * the callback runs. Each critical section therefore releases one sync object as it ends, and each
 * callback acquires it before freeing. This over-approximates: it also orders sections that began
 * after the node was unlinked, so TSan would not flag one that still reached the node (a broken unlink,
 * a use after free that the ASan build and the tests' checks are there to catch). call_rcu's queue is invisible too: the caller releases the node, the callback acquires it.
 * rcu_barrier hands memory it allocates itself to liburcu's thread through that queue, and TSan
 * reports the free there, inside liburcu, where no annotation can go. So destroy has TSan ignore the
 * calling thread's memory accesses for that one call: the library is uninstrumented and runs no
 * callback on this thread, so the only accesses ignored are liburcu's own allocations.
 */
#include "tsan.h"

static char grace_period;	/* TSan's sync object for "the critical sections before now have ended" */

static void read_lock(void)
{
	rcu_read_lock();
}

static void read_unlock(void)
{
	tsan_release(&grace_period);
	rcu_read_unlock();
}

static struct skiplist_node *ptr_of(uintptr_t word)
{
	return (struct skiplist_node *)(word & ~MARK);
}

static bool is_marked(uintptr_t word)
{
	return word & MARK;
}

/*
 * Acquire on every load of a pointer: a node's key, value and tower were written before the release
 * that published it (the link, or a snip that copied it), and the reader is about to read them.
 */
static uintptr_t load_next(struct skiplist_node *n, unsigned level)
{
	return atomic_load_explicit(&n->next[level], memory_order_acquire);
}

/* acq_rel: a successful link or snip publishes the node it points to (release) and reads its word. */
static bool cas_next(struct skiplist_node *n, unsigned level, uintptr_t expected, uintptr_t desired)
{
	return atomic_compare_exchange_strong_explicit(&n->next[level], &expected, desired, memory_order_acq_rel,
						       memory_order_acquire);
}

unsigned skiplist_height(uint64_t random)
{
	/* The top half: the low bits of simple generators (and of xorshift64*) are the weak ones. */
	uint32_t bits = (uint32_t)(random >> 32);
	uint32_t ones = (uint32_t)__builtin_ctz(~bits | (UINT32_C(1) << (SKIPLIST_MAX_HEIGHT - 1)));
	return 1 + ones;
}

static struct skiplist_node *new_node(uint64_t key, uint64_t value, unsigned height)
{
	struct skiplist_node *n = malloc(sizeof(*n) + height * sizeof(n->next[0]));
	if (!n)
		return NULL;
	n->key = key;
	n->value = value;
	n->height = height;
	atomic_init(&n->owners, 2);
	for (unsigned i = 0; i < height; i++)
		atomic_init(&n->next[i], 0);
	return n;
}

static void free_node(struct rcu_head *head)
{
	struct skiplist_node *n = caa_container_of(head, struct skiplist_node, rcu);
	tsan_acquire(&grace_period);
	tsan_acquire(n);	/* call_rcu's queue: everything its caller did to the node */
	free(n);
}

int skiplist_init(struct skiplist *s)
{
	s->head = new_node(0, 0, SKIPLIST_MAX_HEIGHT);
	return s->head ? 0 : ENOMEM;
}

void skiplist_destroy(struct skiplist *s)
{
	tsan_ignore_begin();
	rcu_barrier();
	tsan_ignore_end();
	/* Every deleted node was swept from every level by its last owner: what is left is present. */
	for (struct skiplist_node *n = ptr_of(load_next(s->head, 0)), *next; n; n = next) {
		next = ptr_of(load_next(n, 0));
		free(n);
	}
	free(s->head);
	s->head = NULL;
}

/*
 * Fills preds[i] with the last node of level i whose key is below key and succs[i] with the node after
 * it (NULL: the end), for every level, unlinking each marked node met on the way. A failed unlink means
 * the predecessor changed under us (or was marked itself): the search starts again from the head.
 * Returns whether succs[0] holds key.
 *
 * With sweep, the search also walks on through the nodes whose key equals key, unlinking the marked
 * ones, and starts no level from a predecessor already marked at that level. A marked predecessor has a
 * frozen pointer that may skip nodes linked after it was marked, and the sweep must see every node of
 * the level: when it returns, no node with this key that was marked before it began is linked at any
 * level. Nodes with equal keys meet on a level when a deleted node's inserter is still linking its upper
 * levels after a new node with the same key went in; a search for an insert stops at the first of them.
 */
static bool find(struct skiplist *s, uint64_t key, struct skiplist_node **preds, struct skiplist_node **succs,
		 bool sweep)
{
	struct skiplist_node *pred;
retry:
	pred = s->head;
	for (int i = SKIPLIST_MAX_HEIGHT - 1; i >= 0; i--) {
		uintptr_t first = load_next(pred, (unsigned)i);
		if (sweep && is_marked(first))
			goto retry;
		struct skiplist_node *prev = pred, *curr = ptr_of(first);
		bool settled = false;
		succs[i] = NULL;
		while (curr) {
			uintptr_t next = load_next(curr, (unsigned)i);
			if (is_marked(next)) {
				if (!cas_next(prev, (unsigned)i, (uintptr_t)curr, next & ~MARK))
					goto retry;
				curr = ptr_of(next);
				continue;
			}
			if (curr->key < key) {
				pred = prev = curr;
				curr = ptr_of(next);
				continue;
			}
			if (!settled) {
				succs[i] = curr;
				settled = true;
			}
			if (!sweep || curr->key != key)
				break;
			prev = curr;
			curr = ptr_of(next);
		}
		preds[i] = pred;
	}
	return succs[0] && succs[0]->key == key;
}

/*
 * Drops one of the node's two owners. The last one out knows the other is done with it: the inserter
 * has made its last link, and the node is marked. It sweeps the node off every level and hands it to
 * RCU. Called inside a read-side critical section, which the callback's grace period then waits for.
 */
static void put_node(struct skiplist *s, struct skiplist_node *n)
{
	struct skiplist_node *preds[SKIPLIST_MAX_HEIGHT], *succs[SKIPLIST_MAX_HEIGHT];

	/* acq_rel: the last one out sees the other's links and marks before it sweeps. */
	if (atomic_fetch_sub_explicit(&n->owners, 1, memory_order_acq_rel) != 1)
		return;
	find(s, n->key, preds, succs, true);
	tsan_release(n);
	call_rcu(&n->rcu, free_node);
}

/*
 * Links the node, already at level 0, into its upper levels from the bottom up. Stops at the first
 * level a delete has marked: the delete marks from the top down, so every level above is marked too,
 * and a node being deleted must not be linked any higher.
 */
static void link_upper(struct skiplist *s, struct skiplist_node *n, struct skiplist_node **preds,
		       struct skiplist_node **succs)
{
	for (unsigned i = 1; i < n->height; i++) {
		for (;;) {
			uintptr_t mine = load_next(n, i);
			if (is_marked(mine))
				return;
			/*
			 * The book links with the successor of the first search: after a retry that one
			 * may be gone, so the node first points at the current successor. Only a delete
			 * changes the word meanwhile, and then it is marked: stop.
			 */
			if (mine != (uintptr_t)succs[i] && !cas_next(n, i, mine, (uintptr_t)succs[i]))
				return;
			if (cas_next(preds[i], i, (uintptr_t)succs[i], (uintptr_t)n))
				break;
			find(s, n->key, preds, succs, false);
		}
	}
}

int skiplist_insert(struct skiplist *s, uint64_t key, uint64_t value, uint64_t random)
{
	struct skiplist_node *preds[SKIPLIST_MAX_HEIGHT], *succs[SKIPLIST_MAX_HEIGHT];
	struct skiplist_node *n = new_node(key, value, skiplist_height(random));
	if (!n)
		return ENOMEM;

	read_lock();
	for (;;) {
		if (find(s, key, preds, succs, false)) {
			read_unlock();
			free(n);	/* never published */
			return EEXIST;
		}
		/* Not yet published: relaxed stores, the link's release covers them. */
		for (unsigned i = 0; i < n->height; i++)
			atomic_store_explicit(&n->next[i], (uintptr_t)succs[i], memory_order_relaxed);
		if (cas_next(preds[0], 0, (uintptr_t)succs[0], (uintptr_t)n))
			break;
	}
	link_upper(s, n, preds, succs);
	put_node(s, n);
	read_unlock();
	return 0;
}

bool skiplist_delete(struct skiplist *s, uint64_t key, uint64_t *value)
{
	struct skiplist_node *preds[SKIPLIST_MAX_HEIGHT], *succs[SKIPLIST_MAX_HEIGHT];

	read_lock();
	if (!find(s, key, preds, succs, false)) {
		read_unlock();
		return false;
	}
	struct skiplist_node *n = succs[0];
	/* Top down, so that a level found marked tells the inserter every level above is marked too. */
	for (unsigned i = n->height; i-- > 1;)
		atomic_fetch_or_explicit(&n->next[i], MARK, memory_order_acq_rel);
	bool mine = !is_marked(atomic_fetch_or_explicit(&n->next[0], MARK, memory_order_acq_rel));
	if (mine) {
		if (value)
			*value = n->value;
		put_node(s, n);
	}
	read_unlock();
	return mine;
}

/*
 * The last node of each level below key, down to level 0 (stepping over marked nodes, writing
 * nothing); returns the first node at level 0 whose key is >= key and that was unmarked when read.
 */
static struct skiplist_node *descend(struct skiplist *s, uint64_t key)
{
	struct skiplist_node *pred = s->head, *curr = NULL;
	for (int i = SKIPLIST_MAX_HEIGHT - 1; i >= 0; i--) {
		curr = ptr_of(load_next(pred, (unsigned)i));
		while (curr) {
			uintptr_t next = load_next(curr, (unsigned)i);
			if (is_marked(next)) {
				curr = ptr_of(next);
				continue;
			}
			if (curr->key >= key)
				break;
			pred = curr;
			curr = ptr_of(next);
		}
	}
	return curr;
}

bool skiplist_lookup(struct skiplist *s, uint64_t key, uint64_t *value)
{
	read_lock();
	struct skiplist_node *n = descend(s, key);
	bool found = n && n->key == key;
	if (found && value)
		*value = n->value;
	read_unlock();
	return found;
}

size_t skiplist_scan(struct skiplist *s, uint64_t from, uint64_t *keys, uint64_t *values, size_t max)
{
	size_t got = 0;
	read_lock();
	for (struct skiplist_node *n = max ? descend(s, from) : NULL; n && got < max;) {
		uintptr_t next = load_next(n, 0);
		if (!is_marked(next)) {
			if (keys)
				keys[got] = n->key;
			if (values)
				values[got] = n->value;
			got++;
		}
		n = ptr_of(next);
	}
	read_unlock();
	return got;
}

/* Whether each node of level i is on level i - 1 too, in the same order. Quiescent lists only. */
static bool sublist(struct skiplist *s, unsigned i)
{
	struct skiplist_node *below = ptr_of(load_next(s->head, i - 1));
	for (struct skiplist_node *n = ptr_of(load_next(s->head, i)); n; n = ptr_of(load_next(n, i))) {
		while (below && below != n && below->key <= n->key)
			below = ptr_of(load_next(below, i - 1));
		if (below != n)
			return false;
	}
	return true;
}

bool skiplist_check(struct skiplist *s, bool quiescent, size_t *keys)
{
	bool ok = true;
	size_t present = 0;

	read_lock();
	for (unsigned i = 0; i < SKIPLIST_MAX_HEIGHT && ok; i++) {
		struct skiplist_node *last = NULL, *last_live = NULL;
		for (struct skiplist_node *n = ptr_of(load_next(s->head, i)); n && ok;) {
			uintptr_t next = load_next(n, i);
			bool live = !is_marked(next);
			ok = n->height > i && (!last || last->key <= n->key) &&
			     (!live || !last_live || last_live->key != n->key) && (live || !quiescent);
			if (live) {
				last_live = n;
				present += i == 0;
			}
			last = n;
			n = ptr_of(next);
		}
		if (ok && quiescent && i > 0)
			ok = sublist(s, i);
	}
	read_unlock();
	if (keys && quiescent)
		*keys = present;
	return ok;
}
