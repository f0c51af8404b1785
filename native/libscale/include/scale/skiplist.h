/*
 * scale/skiplist.h - a lock-free skip list: the talk's insight 3, "avoiding write locks", on the side
 * that does not scale. Kept an address space's regions in it, independent mmaps would take no lock, yet
 * they would still not be independent.
 *
 * The algorithm is Herlihy and Shavit's LockFreeSkipList (The Art of Multiprocessor Programming, 14.4),
 * itself Fraser's: every node has a tower of next pointers, one per level it belongs to, each with a
 * mark bit. The list at level 0 holds every key; the list at level i + 1 is a sublist of level i's, a
 * node reaching level i with probability 2^-i, so a search starts at the head's top and goes down.
 *   insert  finds the predecessors and successors at every level, links the node at level 0 with one
 *           CAS (the insert has happened), then links it level by level upwards;
 *   delete  marks the node's next pointers from the top down; marking level 0 is the delete, and only
 *           one caller can do it; the node is unlinked physically by any search that meets it (a CAS
 *           of its predecessor's pointer past it, with the predecessor unmarked);
 *   lookup  walks without writing anything, stepping over marked nodes.
 * The book's insert leaves two holes that a language without a garbage collector must close (Fraser
 * closes them): the new node's pointer at each level is set to the successor just found before the
 * link, and the linking stops as soon as a delete has marked the node.
 *
 * Why disjoint keys still meet: every operation starts at the head and walks down the same few tall
 * towers, whatever its key, so they are read by everybody; and an insert or delete of a node of height
 * h writes the predecessor of the node at each of its h levels. Once h is above what a key range's own
 * nodes reach (2^h ~ the keys in the range), that predecessor lies outside the range - a tall node of
 * another range, or the head - and the write takes the line away from every core that reads it. The
 * radix tree (scale/radix.h) has no such shared place: disjoint ranges live in disjoint nodes.
 *
 * Reclamation: a node unlinked may still be under a lookup, so it is freed only after an RCU grace
 * period (liburcu, default flavour; call_rcu). Its inserter may still be linking its upper levels when
 * it is deleted, so the node counts two owners, the inserter and the list; the last of the two to let go
 * sweeps every level clear of it (after the inserter's last link, so none is missed) and calls call_rcu.
 * While the caller is inside an operation (one RCU read-side critical section), no node it reached is
 * freed, which also rules out ABA on the pointers it compares.
 *
 * Concurrency: all functions but init and destroy may run at once, from any threads, each registered
 * with liburcu (rcu_register_thread; every operation takes rcu_read_lock, updates call call_rcu).
 * skiplist_destroy runs once nothing else uses the list and waits for pending frees (rcu_barrier).
 * Keys and values are any uint64_t. Costs: 40 bytes and 8 per level a node, 2 levels on average.
 */
#ifndef SCALE_SKIPLIST_H
#define SCALE_SKIPLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Levels a tower may have: with a node in each level with probability 1/2, enough for 2^32 keys. */
#define SKIPLIST_MAX_HEIGHT 32

struct skiplist_node;

struct skiplist {
	struct skiplist_node *head;	/* a full-height tower below every key, never marked */
};

/* Returns 0 or ENOMEM. */
int skiplist_init(struct skiplist *s);
/* Frees every node, those still waiting for a grace period first (rcu_barrier). */
void skiplist_destroy(struct skiplist *s);

/*
 * Inserts key -> value. random is a random word from the caller's own generator: the tower's height
 * comes from it (its top bits), so that inserts share no generator, which would be a bottleneck of its
 * own. Returns 0; EEXIST if the key is present (its value is left alone); ENOMEM.
 */
int skiplist_insert(struct skiplist *s, uint64_t key, uint64_t value, uint64_t random);
/* Returns whether key is present, and its value in *value if value is not NULL. */
bool skiplist_lookup(struct skiplist *s, uint64_t key, uint64_t *value);
/* Deletes key: returns whether this call removed it (one caller per insert), its value in *value. */
bool skiplist_delete(struct skiplist *s, uint64_t key, uint64_t *value);

/*
 * Copies up to max keys present, from the first >= from onwards, in ascending order (find_vma and its
 * successors). Not a snapshot under concurrent updates: each key returned was present at some point
 * of the call. Returns how many were copied.
 */
size_t skiplist_scan(struct skiplist *s, uint64_t from, uint64_t *keys, uint64_t *values, size_t max);

/* The height a tower gets from the random word given to skiplist_insert: 1 + its top bits' trailing ones. */
unsigned skiplist_height(uint64_t random);

/*
 * For tests: walks every level and returns whether it is in order: keys never decrease along a level,
 * no two unmarked nodes of a level share a key, and no node is linked above its tower. May run during
 * updates. With quiescent (nothing else running) it also checks that no marked node is still linked and
 * that each level is a sublist of the one below, and stores the keys present in *keys if not NULL.
 */
bool skiplist_check(struct skiplist *s, bool quiescent, size_t *keys);

#endif
