/*
 * scale/falseshare.h - one object's fields laid out two ways (OSDI 2010, section 4.6).
 *
 * Stock (struct fs_packed): fields read on every use (flags, ops) share a 64-byte cache line with
 * counters that are written on every use, as struct page kept its reference count beside its flags and
 * net_device its statistics beside its read-mostly fields. Each write steals the line from every core
 * that only wanted to read, and writers of neighbouring counters steal it from each other, although no
 * two cores touch the same byte.
 * Scalable (struct fs_split_ro + struct fs_split_hot): the read-mostly fields on a line of their own,
 * which then stays shared in every core's cache, and each writer's counter on its own SCALE_LINE slot.
 * The cost is memory: a line per writer instead of a word.
 *
 * Each hot counter has a single writer (its task); readers of the read-mostly fields never write them
 * after set-up.
 */
#ifndef SCALE_FALSESHARE_H
#define SCALE_FALSESHARE_H

#include "scale/cpu.h"

#include <stdatomic.h>
#include <stddef.h>

#define FS_PACKED_WRITERS 6

struct fs_packed {
	_Alignas(64) long flags;
	long ops;
	_Atomic long hot[FS_PACKED_WRITERS];
};

struct fs_split_ro {
	SCALE_ALIGNED long flags;
	long ops;
};

struct fs_split_hot {
	SCALE_ALIGNED _Atomic long hot;
};

_Static_assert(sizeof(struct fs_packed) == 64, "the stock layout is one cache line");
_Static_assert(offsetof(struct fs_split_hot, hot) == 0 && sizeof(struct fs_split_hot) == SCALE_LINE,
	       "each split counter owns a whole slot");

/* Single writer per counter: a relaxed load and store, which compile to a plain add. */
static inline void fs_bump(_Atomic long *hot)
{
	atomic_store_explicit(hot, atomic_load_explicit(hot, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* One use of the object: read the read-mostly fields, count the use. Returns what was read. */
static inline long fs_packed_use(struct fs_packed *o, unsigned writer)
{
	long seen = o->flags + o->ops;
	fs_bump(&o->hot[writer % FS_PACKED_WRITERS]);
	return seen;
}

static inline long fs_split_use(const struct fs_split_ro *ro, struct fs_split_hot *mine)
{
	long seen = ro->flags + ro->ops;
	fs_bump(&mine->hot);
	return seen;
}

#endif
