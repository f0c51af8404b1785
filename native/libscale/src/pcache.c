#include "scale/pcache.h"

#include <errno.h>
#include <stdlib.h>

struct pcache_entry {
	struct pcache_entry *next;
	uint64_t key, value;
};

static unsigned bucket_of(const struct pcache *p, uint64_t key)
{
	/* Fibonacci hashing: consecutive keys (mount ids) spread over the buckets. */
	return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 32) % p->nbuckets;
}

int pcache_init(struct pcache *p, unsigned nbuckets)
{
	p->lock = (struct scale_spinlock)SCALE_SPINLOCK_INITIALIZER;
	atomic_init(&p->gen, 1);
	p->nbuckets = nbuckets ? nbuckets : 1;
	p->buckets = calloc(p->nbuckets, sizeof(*p->buckets));
	p->nr_slots = scale_nr_slots();
	p->slots = scale_alloc_lines(p->nr_slots, sizeof(*p->slots));
	if (!p->buckets || !p->slots) {
		free(p->buckets);
		scale_free(p->slots);
		return ENOMEM;
	}
	return 0;
}

void pcache_destroy(struct pcache *p)
{
	for (unsigned b = 0; b < p->nbuckets; b++) {
		for (struct pcache_entry *e = p->buckets[b], *next; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(p->buckets);
	scale_free(p->slots);
}

static struct pcache_entry **find(struct pcache *p, uint64_t key)
{
	struct pcache_entry **e = &p->buckets[bucket_of(p, key)];
	while (*e && (*e)->key != key)
		e = &(*e)->next;
	return e;
}

/* Called with the central lock held, before the table changes: every cached entry is stale from here. */
static void invalidate_caches(struct pcache *p)
{
	uint64_t g = atomic_load_explicit(&p->gen, memory_order_relaxed);
	/* seq_cst: the bump must be visible before any changed entry can be (the readers load it first). */
	atomic_store_explicit(&p->gen, g + 1, memory_order_seq_cst);
}

int pcache_insert(struct pcache *p, uint64_t key, uint64_t value)
{
	struct pcache_entry *fresh = malloc(sizeof(*fresh));
	if (!fresh)
		return ENOMEM;
	scale_spin_lock(&p->lock);
	invalidate_caches(p);
	struct pcache_entry **e = find(p, key);
	if (*e) {
		(*e)->value = value;
		free(fresh);
	} else {
		*fresh = (struct pcache_entry){ .next = NULL, .key = key, .value = value };
		*e = fresh;
	}
	scale_spin_unlock(&p->lock);
	return 0;
}

bool pcache_remove(struct pcache *p, uint64_t key)
{
	scale_spin_lock(&p->lock);
	struct pcache_entry **e = find(p, key), *gone = *e;
	if (gone) {
		invalidate_caches(p);
		*e = gone->next;
	}
	scale_spin_unlock(&p->lock);
	free(gone);
	return gone != NULL;
}

/* Returns the generation the answer belongs to; the caller holds nothing. */
static uint64_t central_lookup(struct pcache *p, uint64_t key, bool *found, uint64_t *value)
{
	scale_spin_lock(&p->lock);
	struct pcache_entry *e = *find(p, key);
	uint64_t gen = atomic_load_explicit(&p->gen, memory_order_relaxed);
	*found = e != NULL;
	if (e)
		*value = e->value;
	scale_spin_unlock(&p->lock);
	return gen;
}

bool pcache_lookup_central(struct pcache *p, uint64_t key, uint64_t *value)
{
	bool found;
	central_lookup(p, key, &found, value);
	return found;
}

bool pcache_lookup(struct pcache *p, uint64_t key, uint64_t *value)
{
	struct pcache_slot *s = &p->slots[scale_slot(p->nr_slots)];
	struct pcache_way *w = &s->ways[key % PCACHE_WAYS];
	/* seq_cst pairs with invalidate_caches: a hit below is a value current at this load. */
	uint64_t now = atomic_load_explicit(&p->gen, memory_order_seq_cst);
	bool hit;

	scale_spin_lock(&s->lock);
	hit = w->gen == now && w->key == key;
	if (hit)
		*value = w->value;
	scale_spin_unlock(&s->lock);
	if (hit)
		return true;

	bool found;
	uint64_t gen = central_lookup(p, key, &found, value);
	if (found) {
		scale_spin_lock(&s->lock);
		*w = (struct pcache_way){ .key = key, .value = *value, .gen = gen };
		scale_spin_unlock(&s->lock);
	}
	return found;
}
