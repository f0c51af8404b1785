#include "scale/counter.h"

#include <errno.h>

int sloppy_counter_init(struct sloppy_counter *c, long initial, long threshold)
{
	c->nr_slots = scale_nr_slots();
	c->threshold = threshold < 1 ? 1 : threshold;
	c->slots = scale_alloc_lines(c->nr_slots, sizeof(*c->slots));
	if (!c->slots)
		return ENOMEM;
	atomic_init(&c->central, initial);
	return 0;
}

void sloppy_counter_destroy(struct sloppy_counter *c)
{
	scale_free(c->slots);
	c->slots = NULL;
}

void sloppy_counter_release_spares(struct sloppy_counter *c, struct sloppy_slot *s, long spare)
{
	long give = spare - c->threshold / 2;

	/*
	 * Only the references this CAS took out of the slot go back to central, so the invariant holds
	 * again once both steps are done. A failed CAS means a thread migrated onto this slot changed it
	 * meanwhile; the next decrement over the threshold tries again.
	 */
	if (atomic_compare_exchange_strong_explicit(&s->spare, &spare, spare - give, memory_order_relaxed,
						    memory_order_relaxed))
		atomic_fetch_sub_explicit(&c->central, give, memory_order_relaxed);
}

long sloppy_counter_spares(struct sloppy_counter *c)
{
	long sum = 0;
	for (unsigned i = 0; i < c->nr_slots; i++)
		sum += atomic_load_explicit(&c->slots[i].spare, memory_order_relaxed);
	return sum;
}

long sloppy_counter_central(struct sloppy_counter *c)
{
	return atomic_load_explicit(&c->central, memory_order_relaxed);
}

long sloppy_counter_in_use(struct sloppy_counter *c)
{
	long spares = sloppy_counter_spares(c);
	return sloppy_counter_central(c) - spares;
}

long sloppy_counter_reconcile(struct sloppy_counter *c)
{
	for (unsigned i = 0; i < c->nr_slots; i++) {
		long spare = atomic_exchange_explicit(&c->slots[i].spare, 0, memory_order_acq_rel);
		if (spare)
			atomic_fetch_sub_explicit(&c->central, spare, memory_order_acq_rel);
	}
	return atomic_load_explicit(&c->central, memory_order_acquire);
}

int pcpu_counter_init(struct pcpu_counter *c, long initial, long batch)
{
	c->nr_slots = scale_nr_slots();
	c->batch = batch > 0 ? batch : (2L * c->nr_slots > 32 ? 2L * c->nr_slots : 32);
	c->slots = scale_alloc_lines(c->nr_slots, sizeof(*c->slots));
	if (!c->slots)
		return ENOMEM;
	atomic_init(&c->count, initial);
	return 0;
}

void pcpu_counter_destroy(struct pcpu_counter *c)
{
	scale_free(c->slots);
	c->slots = NULL;
}

long pcpu_counter_sum(struct pcpu_counter *c)
{
	long sum = atomic_load_explicit(&c->count, memory_order_relaxed);
	for (unsigned i = 0; i < c->nr_slots; i++)
		sum += atomic_load_explicit(&c->slots[i].delta, memory_order_relaxed);
	return sum;
}
