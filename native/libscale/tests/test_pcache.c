/*
 * The per-core cache: hunts for a stale hit. A writer keeps raising each key's version and publishes
 * each version only once pcache_insert returned; a reader that then sees an older version, or finds a
 * key published as removed, got a stale hit.
 */
#include "scale/pcache.h"
#include "stress.h"

#define KEYS (PCACHE_WAYS + 16)	/* more keys than ways: ways are shared and evicted too */

static struct pcache cache;
static _Atomic uint64_t committed[KEYS];	/* the version each key is known to have at least */
static atomic_bool removed[KEYS];
static _Atomic long hits_checked;

/* One writer, so each key's versions only rise. */
static void writer(struct stress_worker *w)
{
	uint64_t version = 1;
	while (stress_running(w)) {
		unsigned k = (unsigned)(stress_rand(w) % KEYS);
		if (k == KEYS - 1) {
			/* The last key goes away for good: afterwards no lookup may find it. */
			if (version > 1000 && !atomic_load(&removed[k])) {
				CHECK(pcache_remove(&cache, k), "remove");
				atomic_store_explicit(&removed[k], true, memory_order_release);
			}
			continue;
		}
		version++;
		CHECK(pcache_insert(&cache, k, version) == 0, "insert");
		atomic_store_explicit(&committed[k], version, memory_order_release);
	}
}

static void reader(struct stress_worker *w)
{
	bool central = w->id % 4 == 3;	/* a few readers take the stock path: both must agree */
	uint64_t last[KEYS] = { 0 };
	long checked = 0;
	while (stress_running(w)) {
		unsigned k = (unsigned)(stress_rand(w) % KEYS);
		uint64_t floor = atomic_load_explicit(&committed[k], memory_order_acquire);
		bool gone = atomic_load_explicit(&removed[k], memory_order_acquire);
		uint64_t v = 0;
		bool found = central ? pcache_lookup_central(&cache, k, &v) : pcache_lookup(&cache, k, &v);
		if (gone) {
			CHECK(!found, "key %u found after it was removed (stale hit)", k);
			continue;
		}
		if (k == KEYS - 1)
			continue;
		CHECK(found, "key %u missing", k);
		CHECK(v >= floor, "key %u: version %llu after %llu was committed (stale hit)", k,
		      (unsigned long long)v, (unsigned long long)floor);
		CHECK(v >= last[k], "key %u went back from %llu to %llu", k, (unsigned long long)last[k],
		      (unsigned long long)v);
		last[k] = v;
		checked++;
		if (stress_rand(w) % 1024 == 0)
			stress_migrate(w);
	}
	atomic_fetch_add(&hits_checked, checked);
}

static void body(struct stress_worker *w)
{
	if (w->id == 0)
		writer(w);
	else
		reader(w);
}

int main(void)
{
	unsigned n = stress_threads() + 1;
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w && pcache_init(&cache, 16) == 0, "init");
	for (unsigned k = 0; k < KEYS; k++) {
		CHECK(pcache_insert(&cache, k, 1) == 0, "insert");
		atomic_init(&committed[k], 1);
	}
	uint64_t v;
	CHECK(pcache_lookup(&cache, 3, &v) && v == 1, "first lookup");
	CHECK(pcache_lookup(&cache, 3, &v) && v == 1, "cached lookup");
	CHECK(!pcache_lookup(&cache, 1000, &v), "absent key found");
	stress_run(n, stress_seconds(), body, NULL, w);
	CHECK(atomic_load(&hits_checked) > 1000, "only %ld lookups checked", atomic_load(&hits_checked));
	pcache_destroy(&cache);
	free(w);
	printf("PASS pcache: %ld lookups, no stale hit (%u threads on %u CPUs)\n", atomic_load(&hits_checked), n,
	       stress_cpus());
	return 0;
}
