/*
 * scale/freelist.h - a pool of free objects: one free list under one lock (stock, the packet-buffer pool
 * the paper found contended) against per-core free lists (the paper's fix, OSDI 2010, section 4.5).
 *
 * Scalable: each CPU slot keeps its own free list under its own lock. An allocation pops from the
 * local list; an empty local list first takes a batch from the global list. A free pushes onto the
 * local list; a local list longer than twice the batch gives a batch back, so objects freed on one
 * core and allocated on another (a producer and a consumer) flow back through the global list.
 * Costs: up to 2 x batch idle objects per CPU slot; an allocation may fail (NULL) while objects sit
 * idle on other slots' lists, so size the pool for that.
 *
 * Objects are the caller's: any memory of at least sizeof(struct fl_obj) bytes, handed in with
 * *_free before the first allocation. Concurrency: alloc and free may run concurrently.
 */
#ifndef SCALE_FREELIST_H
#define SCALE_FREELIST_H

#include "scale/cpu.h"

struct fl_obj {
	struct fl_obj *next;
};

struct fl_list {
	SCALE_ALIGNED struct scale_spinlock lock;
	struct fl_obj *head;
	long count;
};

/* Stock: one list. */
struct global_freelist {
	struct fl_list list;
};

/* Scalable: a list per CPU slot in front of a global one. */
struct pc_freelist {
	long batch;
	unsigned nr_slots;
	struct fl_list global;
	struct fl_list *slots;
};

void global_freelist_init(struct global_freelist *f);
struct fl_obj *global_freelist_alloc(struct global_freelist *f);
void global_freelist_free(struct global_freelist *f, struct fl_obj *o);

/* batch >= 1. Returns 0 or ENOMEM. */
int pc_freelist_init(struct pc_freelist *f, long batch);
void pc_freelist_destroy(struct pc_freelist *f);
struct fl_obj *pc_freelist_alloc(struct pc_freelist *f);
void pc_freelist_free(struct pc_freelist *f, struct fl_obj *o);
/* Free objects on every list (exact when quiescent). */
long pc_freelist_count(struct pc_freelist *f);

#endif
