/*
 * scale/pcache.h - a central hash table under one spinlock, with per-core caches in front of it: the
 * paper's per-core vfsmount tables (OSDI 2010, section 4.5), the talk's lookup_mnt.
 *
 * Stock lookups (pcache_lookup_central) take the central lock every time, as lookup_mnt did under
 * vfsmount_lock: every lookup writes the lock's line, so lookups by all cores serialise. Cached lookups
 * (pcache_lookup) first look in the calling CPU's cache and touch no shared line that anybody writes,
 * unless the table changed.
 *
 * Invalidation is a generation number: every update bumps it, under the central lock, before it changes
 * the table; a cache entry remembers the generation it was filled in and is only a hit while that is
 * still the current one. An update therefore invalidates every cache at once at the cost of one write,
 * which suits tables that, like the mount table, change rarely. A stale hit would be a bug: a hit is
 * linearised at its read of the generation, before any update that had not yet bumped it.
 *
 * Concurrency: all functions may run concurrently. Keys are any uint64_t; values likewise.
 * Costs: a cache of PCACHE_WAYS entries per CPU slot; updates are O(1) but make every cache miss once.
 */
#ifndef SCALE_PCACHE_H
#define SCALE_PCACHE_H

#include "scale/cpu.h"

#include <stdbool.h>
#include <stdint.h>

#define PCACHE_WAYS 256

struct pcache_entry;

/* Fields are atomic because a hit reads them without a lock (a seqcount guards the whole way). */
struct pcache_way {
	_Atomic uint64_t key, value, gen;	/* gen 0: empty (the table's generation starts at 1) */
};

struct pcache_slot {
	/*
	 * A hit only reads: it checks the seqcount before and after copying the way, so a cache hit
	 * writes nothing at all. Fills (misses) serialise on the lock, because after a migration two
	 * threads may fill one slot at the same time.
	 */
	SCALE_ALIGNED _Atomic uint64_t seq;
	struct scale_spinlock lock;
	struct pcache_way ways[PCACHE_WAYS];
};

struct pcache {
	SCALE_ALIGNED struct scale_spinlock lock;
	_Atomic uint64_t gen;
	unsigned nbuckets;
	struct pcache_entry **buckets;
	unsigned nr_slots;
	struct pcache_slot *slots;
};

/* Returns 0 or ENOMEM. */
int pcache_init(struct pcache *p, unsigned nbuckets);
void pcache_destroy(struct pcache *p);

/* Inserts or replaces key. Returns 0 or ENOMEM. */
int pcache_insert(struct pcache *p, uint64_t key, uint64_t value);
/* Returns whether key was present. */
bool pcache_remove(struct pcache *p, uint64_t key);

/* Stock: the central table under its lock. */
bool pcache_lookup_central(struct pcache *p, uint64_t key, uint64_t *value);
/* Scalable: the calling CPU's cache, then the central table (filling the cache). */
bool pcache_lookup(struct pcache *p, uint64_t key, uint64_t *value);

#endif
