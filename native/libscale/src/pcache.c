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

/*
 * A seqlock without standalone fences (which ThreadSanitizer cannot model): the way's fields are
 * stored with release and loaded with acquire, so a reader that sees any field of a fill also sees
 * the odd count that fill began with, and its second look at the count tells it the copy is torn.
 */

/* A consistent copy of one way, or false if a fill was under way (the caller then takes the miss path). */
static bool read_way(struct pcache_slot *s, struct pcache_way *w, uint64_t *key, uint64_t *value, uint64_t *gen)
{
	uint64_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
	if (before & 1)
		return false;
	*key = atomic_load_explicit(&w->key, memory_order_acquire);
	*value = atomic_load_explicit(&w->value, memory_order_acquire);
	*gen = atomic_load_explicit(&w->gen, memory_order_acquire);
	return atomic_load_explicit(&s->seq, memory_order_relaxed) == before;
}

static void fill_way(struct pcache_slot *s, struct pcache_way *w, uint64_t key, uint64_t value, uint64_t gen)
{
	scale_spin_lock(&s->lock);
	/* acq_rel: the field stores below cannot be seen before the count turns odd. */
	uint64_t seq = atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
	atomic_store_explicit(&w->key, key, memory_order_release);
	atomic_store_explicit(&w->value, value, memory_order_release);
	atomic_store_explicit(&w->gen, gen, memory_order_release);
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
	scale_spin_unlock(&s->lock);
}

bool pcache_lookup(struct pcache *p, uint64_t key, uint64_t *value)
{
	struct pcache_slot *s = &p->slots[scale_slot(p->nr_slots)];
	struct pcache_way *w = &s->ways[key % PCACHE_WAYS];
	/* seq_cst pairs with invalidate_caches: a hit below is a value current at this load. */
	uint64_t now = atomic_load_explicit(&p->gen, memory_order_seq_cst);
	uint64_t k, v, g;

	if (read_way(s, w, &k, &v, &g) && g == now && k == key) {
		*value = v;
		return true;
	}
	bool found;
	uint64_t gen = central_lookup(p, key, &found, value);
	if (found)
		fill_way(s, w, key, *value, gen);
	return found;
}
