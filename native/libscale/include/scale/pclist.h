/*
 * scale/pclist.h - the per-super-block list of open files: one list under one lock (stock) against
 * per-core lists (the paper's fix, OSDI 2010, section 4.5).
 *
 * open() adds the file to a list and close() removes it; remounting read-only must see every open file.
 * Stock: one list and one lock, so every open and close in the file system serialises on that lock.
 * Scalable: each CPU slot has its own list and lock; a node is added to the list of the CPU it is added
 * on and remembers which, so removing it from another CPU (after a migration) locks that list: correct,
 * only slower. A scan takes every list's lock in slot order (one order, so scans cannot deadlock),
 * which makes it O(CPUs) and the rare, expensive operation.
 *
 * Concurrency: add, del and scan may run concurrently; a node is in at most one list at a time, and
 * only its owner adds or removes it.
 */
#ifndef SCALE_PCLIST_H
#define SCALE_PCLIST_H

#include "scale/cpu.h"

struct pclist_node {
	struct pclist_node *prev, *next;
	unsigned home;			/* the slot whose list holds the node */
};

struct pclist_head {
	SCALE_ALIGNED struct scale_spinlock lock;
	struct pclist_node anchor;	/* circular, anchor.next is the first node */
	long count;
};

/* Stock: one list. */
struct lock_list {
	struct pclist_head head;
};

/* Scalable: one list per CPU slot. */
struct pclist {
	unsigned nr_slots;
	struct pclist_head *heads;
};

void lock_list_init(struct lock_list *l);
void lock_list_add(struct lock_list *l, struct pclist_node *n);
void lock_list_del(struct lock_list *l, struct pclist_node *n);
/* Calls fn on every node with the lock held; returns the number of nodes. */
long lock_list_scan(struct lock_list *l, void (*fn)(struct pclist_node *n, void *arg), void *arg);

/* Returns 0 or ENOMEM. */
int pclist_init(struct pclist *l);
void pclist_destroy(struct pclist *l);
void pclist_add(struct pclist *l, struct pclist_node *n);
void pclist_del(struct pclist *l, struct pclist_node *n);
/* Locks every list, calls fn on every node, unlocks; returns the number of nodes. */
long pclist_scan(struct pclist *l, void (*fn)(struct pclist_node *n, void *arg), void *arg);

#endif
