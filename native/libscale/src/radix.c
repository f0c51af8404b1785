#include "scale/radix.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NODE_SIZE sizeof(struct radix_node)
#define EMPTY 0

static unsigned index_at(uint64_t key, unsigned level)
{
	return (unsigned)(key >> (level * RADIX_BITS)) & (RADIX_SLOTS - 1);
}

/*
 * Page-aligned, so that a node shares no cache line with another: two ranges' leaves never falsely
 * share, whatever the allocator put next to them.
 */
static struct radix_node *new_node(void)
{
	struct radix_node *n = aligned_alloc(NODE_SIZE, NODE_SIZE);
	return n ? memset(n, 0, NODE_SIZE) : NULL;
}

int radix_init(struct radix *r)
{
	r->root = new_node();
	return r->root ? 0 : ENOMEM;
}

static struct radix_node *child_of(uint64_t slot)
{
	return (struct radix_node *)(uintptr_t)slot;
}

static void free_subtree(struct radix_node *n, unsigned level)
{
	if (level > 0)
		for (unsigned i = 0; i < RADIX_SLOTS; i++) {
			uint64_t slot = atomic_load_explicit(&n->slot[i], memory_order_relaxed);
			if (slot)
				free_subtree(child_of(slot), level - 1);
		}
	free(n);
}

void radix_destroy(struct radix *r)
{
	free_subtree(r->root, RADIX_LEVELS - 1);
	r->root = NULL;
}

static size_t count_subtree(struct radix_node *n, unsigned level)
{
	size_t nodes = 1;
	if (level > 0)
		for (unsigned i = 0; i < RADIX_SLOTS; i++) {
			uint64_t slot = atomic_load_explicit(&n->slot[i], memory_order_acquire);
			if (slot)
				nodes += count_subtree(child_of(slot), level - 1);
		}
	return nodes;
}

size_t radix_nodes(struct radix *r)
{
	return count_subtree(r->root, RADIX_LEVELS - 1);
}

/*
 * The leaf slot of key. Without install, NULL where an interior node is missing (the key is absent);
 * with it, the missing nodes are installed, and NULL means out of memory.
 */
static _Atomic uint64_t *leaf_slot(struct radix *r, uint64_t key, bool install)
{
	struct radix_node *n = r->root;
	for (unsigned level = RADIX_LEVELS - 1; level > 0; level--) {
		_Atomic uint64_t *slot = &n->slot[index_at(key, level)];
		/* Acquire: the node below was zeroed before it was installed. */
		uint64_t child = atomic_load_explicit(slot, memory_order_acquire);
		if (!child) {
			if (!install)
				return NULL;
			struct radix_node *fresh = new_node();
			if (!fresh)
				return NULL;
			/* Release publishes the zeroes; on failure, acquire the winner's node instead. */
			if (atomic_compare_exchange_strong_explicit(slot, &child, (uint64_t)(uintptr_t)fresh,
								    memory_order_acq_rel, memory_order_acquire))
				child = (uint64_t)(uintptr_t)fresh;
			else
				free(fresh);	/* never published: another thread installed one first */
		}
		n = child_of(child);
	}
	return &n->slot[index_at(key, 0)];
}

/*
 * Leaf slots are stored with release and loaded with acquire: a value is typically a pointer (a page
 * table entry's frame), and whoever finds it must see what the inserter set up behind it.
 */
int radix_insert(struct radix *r, uint64_t key, uint64_t value)
{
	if (key >= RADIX_KEY_LIMIT || value == RADIX_NO_VALUE)
		return EINVAL;
	_Atomic uint64_t *slot = leaf_slot(r, key, true);
	if (!slot)
		return ENOMEM;
	uint64_t expected = EMPTY;
	if (!atomic_compare_exchange_strong_explicit(slot, &expected, value + 1, memory_order_acq_rel,
						     memory_order_acquire))
		return EEXIST;
	return 0;
}

bool radix_lookup(struct radix *r, uint64_t key, uint64_t *value)
{
	if (key >= RADIX_KEY_LIMIT)
		return false;
	_Atomic uint64_t *slot = leaf_slot(r, key, false);
	if (!slot)
		return false;
	uint64_t word = atomic_load_explicit(slot, memory_order_acquire);
	if (word == EMPTY)
		return false;
	if (value)
		*value = word - 1;
	return true;
}

bool radix_delete(struct radix *r, uint64_t key, uint64_t *value)
{
	if (key >= RADIX_KEY_LIMIT)
		return false;
	_Atomic uint64_t *slot = leaf_slot(r, key, false);
	if (!slot)
		return false;
	/*
	 * A plain load first: deleting an absent key then writes nothing, and leaves the line shared.
	 * The exchange decides: of two deletes racing for one insert, one gets the value, one gets empty.
	 */
	if (atomic_load_explicit(slot, memory_order_relaxed) == EMPTY)
		return false;
	uint64_t word = atomic_exchange_explicit(slot, EMPTY, memory_order_acq_rel);
	if (word == EMPTY)
		return false;
	if (value)
		*value = word - 1;
	return true;
}
