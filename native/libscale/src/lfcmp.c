#include "scale/lfcmp.h"

#include <string.h>

bool ldentry_name_set(struct ldentry_name *n, uint64_t parent, const char *name)
{
	size_t len = strlen(name);
	if (len > LDENTRY_NAME_MAX)
		return false;
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->len = (uint32_t)len;
	memcpy(n->words, name, len);
	return true;
}

static void store_fields(struct ldentry *d, const struct ldentry_name *n)
{
	atomic_store_explicit(&d->parent, n->parent, memory_order_relaxed);
	atomic_store_explicit(&d->len, n->len, memory_order_relaxed);
	for (int i = 0; i < LDENTRY_WORDS; i++)
		atomic_store_explicit(&d->words[i], n->words[i], memory_order_relaxed);
}

static bool fields_match(struct ldentry *d, const struct ldentry_name *n)
{
	if (atomic_load_explicit(&d->parent, memory_order_relaxed) != n->parent ||
	    atomic_load_explicit(&d->len, memory_order_relaxed) != n->len)
		return false;
	for (int i = 0; i < LDENTRY_WORDS; i++)
		if (atomic_load_explicit(&d->words[i], memory_order_relaxed) != n->words[i])
			return false;
	return true;
}

int ldentry_init(struct ldentry *d, const struct ldentry_name *n, long sloppy_threshold)
{
	d->lock = (struct scale_spinlock)SCALE_SPINLOCK_INITIALIZER;
	d->next_gen = 2;
	d->dead = false;
	d->count = 0;
	atomic_init(&d->gen, 1);
	store_fields(d, n);
	return sloppy_counter_init(&d->refs, 0, sloppy_threshold);
}

void ldentry_destroy(struct ldentry *d)
{
	sloppy_counter_destroy(&d->refs);
}

bool ldentry_get_locked(struct ldentry *d, const struct ldentry_name *n)
{
	scale_spin_lock(&d->lock);
	bool match = !d->dead && fields_match(d, n);
	if (match)
		d->count++;
	scale_spin_unlock(&d->lock);
	return match;
}

void ldentry_put_locked(struct ldentry *d)
{
	scale_spin_lock(&d->lock);
	d->count--;
	scale_spin_unlock(&d->lock);
}

/* The locking protocol of the scalable form: what the lock-free path falls back to. */
static bool get_slow(struct ldentry *d, const struct ldentry_name *n)
{
	scale_spin_lock(&d->lock);
	bool match = !d->dead && fields_match(d, n);
	if (match)
		sloppy_counter_inc(&d->refs, 1);
	scale_spin_unlock(&d->lock);
	return match;
}

bool ldentry_get_lockfree(struct ldentry *d, const struct ldentry_name *n)
{
	/* Acquire: the field loads below must not be satisfied before this generation was read. */
	uint64_t gen = atomic_load_explicit(&d->gen, memory_order_acquire);
	if (!gen)
		return get_slow(d, n);
	bool match = fields_match(d, n);
	/* The field loads complete before the re-check (the read side of a seqlock). */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&d->gen, memory_order_relaxed) != gen)
		return get_slow(d, n);
	if (!match)
		return false;	/* a consistent copy that does not match: a true miss */
	sloppy_counter_inc(&d->refs, 1);
	/*
	 * seq_cst: the reference is taken before the last look at the generation, so a writer that
	 * killed the entry in between is seen here (it zeroes the generation before counting references).
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&d->gen, memory_order_relaxed) != gen) {
		sloppy_counter_dec(&d->refs, 1);
		return get_slow(d, n);
	}
	return true;
}

void ldentry_put_lockfree(struct ldentry *d)
{
	sloppy_counter_dec(&d->refs, 1);
}

static void write_begin(struct ldentry *d)
{
	scale_spin_lock(&d->lock);
	atomic_store_explicit(&d->gen, 0, memory_order_relaxed);
	/* Readers that see any field we change next also see generation 0 (the write side of a seqlock). */
	atomic_thread_fence(memory_order_seq_cst);
}

void ldentry_rename(struct ldentry *d, const struct ldentry_name *n)
{
	write_begin(d);
	store_fields(d, n);
	if (!d->dead)
		atomic_store_explicit(&d->gen, d->next_gen++, memory_order_release);
	scale_spin_unlock(&d->lock);
}

long ldentry_kill(struct ldentry *d)
{
	write_begin(d);
	d->dead = true;
	long stock = d->count;
	scale_spin_unlock(&d->lock);
	/* Includes the transient reference of any reader still racing with us; it gives it back. */
	return sloppy_counter_in_use(&d->refs) + stock;
}
