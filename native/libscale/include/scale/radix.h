/*
 * scale/radix.h - a radix tree shaped like an x86-64 page table: the talk's insight 3, "avoiding write
 * locks", on the side that scales. Independent mmaps in one address space touch disjoint parts of it.
 *
 * Shape: four levels of nodes of 512 slots, each node one 4 KiB page (page-aligned, as a page-table
 * page), each level indexing 9 bits of the key, top level first: 36-bit keys, the virtual page numbers
 * of a 48-bit address space. Interior slots hold a pointer to the node below or 0; leaf slots hold
 * value + 1 or 0 for empty, so that a zeroed node is all empty (as a zeroed page-table page is all
 * not-present entries) and RADIX_NO_VALUE, which would encode as 0, is the one value that cannot be
 * stored.
 *
 * No locks, one atomic word per slot:
 *   install  a missing interior node is allocated zeroed and put in its parent's slot with one CAS;
 *            the loser of a race frees its own node and goes on with the winner's;
 *   insert   CAS of the leaf slot from empty to the value (fails if present);
 *   lookup   acquire loads down the levels and of the leaf slot; writes nothing;
 *   delete   exchange of the leaf slot to empty (removes only what is there, once).
 * Interior nodes are never freed while the tree lives, as page-table pages stay after munmap, so a
 * lookup needs no RCU and an insert never finds a node vanishing under it; radix_destroy frees them.
 *
 * Why disjoint ranges scale: keys that differ above bit 9 live in different leaves, and those above bit
 * 18 in different level-1 nodes too. Above a range's own nodes, operations only read the slots that lead
 * to them (written once, at install), so the lines stay shared in every cache. Two ranges meet only on a
 * leaf they both cover, 8 slots to a 64-byte line.
 *
 * Concurrency: all functions but init and destroy may run at once, from any threads; no registration.
 * radix_destroy runs once nothing else uses the tree. Costs: a 4 KiB node per 512 keys of a leaf, plus
 * the interior nodes above it; a sparse key set costs up to three nodes a key.
 */
#ifndef SCALE_RADIX_H
#define SCALE_RADIX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RADIX_BITS 9
#define RADIX_SLOTS (1u << RADIX_BITS)
#define RADIX_LEVELS 4
#define RADIX_KEY_BITS (RADIX_BITS * RADIX_LEVELS)
#define RADIX_KEY_LIMIT (UINT64_C(1) << RADIX_KEY_BITS)	/* keys are below this */
#define RADIX_NO_VALUE UINT64_MAX			/* the value a slot cannot hold */

struct radix_node {
	_Atomic uint64_t slot[RADIX_SLOTS];
};

struct radix {
	struct radix_node *root;	/* allocated at init, as a process's top-level page table */
};

/* Returns 0 or ENOMEM. */
int radix_init(struct radix *r);
void radix_destroy(struct radix *r);

/*
 * Inserts key -> value. Returns 0; EEXIST if the key is present (its value is left alone); EINVAL if
 * key >= RADIX_KEY_LIMIT or value == RADIX_NO_VALUE; ENOMEM (nodes installed so far stay).
 */
int radix_insert(struct radix *r, uint64_t key, uint64_t value);
/* Returns whether key is present, and its value in *value if value is not NULL. False out of range. */
bool radix_lookup(struct radix *r, uint64_t key, uint64_t *value);
/* Deletes key: returns whether this call removed it (one caller per insert), its value in *value. */
bool radix_delete(struct radix *r, uint64_t key, uint64_t *value);

/* Nodes in the tree, the root included (a quiescent walk, for tests). */
size_t radix_nodes(struct radix *r);

#endif
