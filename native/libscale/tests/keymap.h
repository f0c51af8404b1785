/*
 * keymap.h - the checks a stress test makes of a concurrent map from keys to values, whatever the map
 * (the radix tree, the skip list), through three calls it gives:
 *   - private keys: each thread owns its keys and keeps what each holds, so every insert, lookup and
 *     delete has one right answer, checked at once and once more at the end;
 *   - shared keys: every thread works on the same few keys, and each key's successful inserts less its
 *     deletes (in number and in the sum of their values) must be what it holds at the end.
 * A value carries its key in its low byte (KEYMAP_KEY_OF), so a lookup can tell it got another key's.
 */
#ifndef SCALE_KEYMAP_H
#define SCALE_KEYMAP_H

#include <errno.h>

#include "stress.h"

#define KEYMAP_SHARED_KEYS 32
#define KEYMAP_KEY_OF(v) ((v) & 0xff)

struct keymap_ops {
	int (*insert)(uint64_t key, uint64_t value, uint64_t random);	/* 0, or EEXIST */
	bool (*lookup)(uint64_t key, uint64_t *value);			/* value may be NULL */
	bool (*remove)(uint64_t key, uint64_t *value);
};

/* Per shared key: successful inserts and deletes, and the sums of the values they put and took. */
struct keymap_shared {
	_Atomic uint64_t inserts[KEYMAP_SHARED_KEYS], deletes[KEYMAP_SHARED_KEYS];
	_Atomic uint64_t inserted_sum[KEYMAP_SHARED_KEYS], deleted_sum[KEYMAP_SHARED_KEYS];
};

/* One random operation (chosen by r) on `key`, owned by this worker, which holds *mine (0: absent). */
static inline void keymap_private_step(struct stress_worker *w, const struct keymap_ops *m, uint64_t key,
				       uint64_t *mine, uint64_t *seq, uint64_t r)
{
	uint64_t v;
	switch (r % 4) {
	case 0:
	case 1: {
		uint64_t value = (uint64_t)(w->id + 1) << 40 | ++*seq;
		int rc = m->insert(key, value, r);
		CHECK(rc == (*mine ? EEXIST : 0), "thread %u key %llu: insert returned %d", w->id,
		      (unsigned long long)key, rc);
		if (!rc)
			*mine = value;
		CHECK(m->lookup(key, &v) && v == *mine, "thread %u: key %llu missing after insert", w->id,
		      (unsigned long long)key);
		break;
	}
	case 2:
		CHECK(m->lookup(key, &v) == (*mine != 0) && (!*mine || v == *mine),
		      "thread %u key %llu: lookup disagrees with the owner", w->id, (unsigned long long)key);
		break;
	default:
		CHECK(m->remove(key, &v) == (*mine != 0) && (!*mine || v == *mine),
		      "thread %u key %llu: delete disagrees with the owner", w->id, (unsigned long long)key);
		*mine = 0;
		CHECK(!m->lookup(key, NULL), "thread %u: key %llu found after its delete", w->id, (unsigned long long)key);
	}
}

/* After the run: the private key of `owner` holds `state` (0: absent). */
static inline void keymap_private_final(const struct keymap_ops *m, uint64_t key, unsigned owner, uint64_t state)
{
	uint64_t v;
	CHECK(m->lookup(key, &v) == (state != 0) && (!state || v == state), "key %llu of thread %u: final state differs",
	      (unsigned long long)key, owner);
}

/* One random operation (chosen by r) on shared key number k, the map's key `key`. */
static inline void keymap_shared_step(struct stress_worker *w, const struct keymap_ops *m, struct keymap_shared *s,
				      unsigned k, uint64_t key, uint64_t *seq, uint64_t r, uint64_t random)
{
	uint64_t v;
	switch (r % 3) {
	case 0: {
		uint64_t value = (uint64_t)(w->id + 1) << 48 | ++*seq << 8 | k;
		int rc = m->insert(key, value, random);
		CHECK(rc == 0 || rc == EEXIST, "insert returned %d", rc);
		if (!rc) {
			atomic_fetch_add(&s->inserts[k], 1);
			atomic_fetch_add(&s->inserted_sum[k], value);
		}
		break;
	}
	case 1:
		if (m->lookup(key, &v))
			CHECK(KEYMAP_KEY_OF(v) == k, "key %u holds the value of key %llu", k,
			      (unsigned long long)KEYMAP_KEY_OF(v));
		break;
	default:
		if (m->remove(key, &v)) {
			CHECK(KEYMAP_KEY_OF(v) == k, "key %u deleted the value of key %llu", k,
			      (unsigned long long)KEYMAP_KEY_OF(v));
			atomic_fetch_add(&s->deletes[k], 1);
			atomic_fetch_add(&s->deleted_sum[k], v);
		}
	}
}

/* After the run: every shared key (key base + k) against its counts; the successful inserts in all, and
 * *present the keys left in the map. */
static inline uint64_t keymap_shared_final(const struct keymap_ops *m, struct keymap_shared *s, uint64_t base,
					   size_t *present)
{
	uint64_t v, total = 0;
	*present = 0;
	for (unsigned k = 0; k < KEYMAP_SHARED_KEYS; k++) {
		uint64_t ins = atomic_load(&s->inserts[k]), del = atomic_load(&s->deletes[k]);
		bool here = m->lookup(base + k, &v);
		CHECK(ins - del == here, "key %u: %llu inserts, %llu deletes, %s", k, (unsigned long long)ins,
		      (unsigned long long)del, here ? "present" : "absent");
		CHECK(atomic_load(&s->inserted_sum[k]) - atomic_load(&s->deleted_sum[k]) == (here ? v : 0),
		      "key %u: the values deleted are not those inserted", k);
		*present += here;
		total += ins;
	}
	CHECK(total > 100, "only %llu inserts succeeded", (unsigned long long)total);
	return total;
}

#endif
