/*
 * The lock-free skip list. Single-threaded first: ascending order, every key found with its value,
 * duplicates refused, deleted keys gone, the ends of the key space. Then threads:
 *   private  each thread owns a set of keys (a range of its own, then keys interleaved with the other
 *            threads', so that list neighbours belong to different threads) and must see exactly its
 *            own state: an insert fails only on a key it holds, a key it inserted is found with its
 *            value until it deletes it, a delete succeeds only on a key it holds;
 *   shared   every thread inserts, looks up and deletes a few keys of one range, with taller towers
 *            than usual so that deletes meet inserts still linking their upper levels. Each success is
 *            counted per key; at the end, what is present must be inserts minus deletes, key by key,
 *            values included (a delete returns the value of the insert it undoes).
 * Meanwhile a checker walks every level, which must stay in order, and scans keys, which must come
 * out ascending. Nodes are freed through RCU: the ASan build finds a node freed under a reader and
 * LSan one never freed.
 */
#include "scale/skiplist.h"
#include "keymap.h"

#include <errno.h>
#include <urcu.h>

#define SINGLE_KEYS 5000
#define PRIVATE_KEYS 128

static struct skiplist list;
static unsigned nthreads;
static bool interleaved;
static uint64_t (*states)[PRIVATE_KEYS];	/* per thread: the value each of its keys holds, 0 absent */
static struct keymap_shared shared;
static _Atomic long ops, checks;

static void single(void)
{
	static uint64_t keys[SINGLE_KEYS], got[SINGLE_KEYS], vals[SINGLE_KEYS];
	uint64_t rng = 88172645463325252ull, v;
	size_t n;

	CHECK(skiplist_height(0) == 1 && skiplist_height(UINT64_MAX) == SKIPLIST_MAX_HEIGHT &&
		      skiplist_height(UINT64_C(0x700000000)) == 4 && skiplist_height(UINT64_C(0xffffffff)) == 1,
	      "tower heights");
	CHECK(skiplist_init(&list) == 0, "init");
	CHECK(!skiplist_lookup(&list, 0, &v) && !skiplist_delete(&list, 0, &v), "empty list");
	CHECK(skiplist_scan(&list, 0, got, NULL, SINGLE_KEYS) == 0, "scan of an empty list");

	/* Keys 1, 4, 7, ... inserted in a scrambled order (7919 is prime to SINGLE_KEYS). */
	for (unsigned i = 0; i < SINGLE_KEYS; i++) {
		keys[i] = (uint64_t)(i * 7919u % SINGLE_KEYS) * 3 + 1;
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		CHECK(skiplist_insert(&list, keys[i], keys[i] * 10, rng) == 0, "insert %llu",
		      (unsigned long long)keys[i]);
	}
	for (unsigned i = 0; i < SINGLE_KEYS; i++) {
		CHECK(skiplist_insert(&list, keys[i], 1, rng) == EEXIST, "duplicate %llu accepted",
		      (unsigned long long)keys[i]);
		CHECK(skiplist_lookup(&list, keys[i], &v) && v == keys[i] * 10, "key %llu: lost or changed",
		      (unsigned long long)keys[i]);
		CHECK(!skiplist_lookup(&list, keys[i] + 1, NULL) && !skiplist_lookup(&list, keys[i] - 1, NULL),
		      "a neighbour of %llu found", (unsigned long long)keys[i]);
	}
	CHECK(skiplist_check(&list, true, &n) && n == SINGLE_KEYS, "order, or %zu keys", n);
	n = skiplist_scan(&list, 0, got, vals, SINGLE_KEYS);
	CHECK(n == SINGLE_KEYS, "scan found %zu keys", n);
	for (unsigned i = 0; i < n; i++)
		CHECK(got[i] == 3 * i + 1 && vals[i] == got[i] * 10, "scan: %u-th key %llu", i,
		      (unsigned long long)got[i]);
	n = skiplist_scan(&list, 3001, got, NULL, 2);
	CHECK(n == 2 && got[0] == 3001 && got[1] == 3004, "scan from 3001");
	n = skiplist_scan(&list, 3002, got, NULL, 1);
	CHECK(n == 1 && got[0] == 3004, "scan from between two keys");

	/* Every other key goes; twice is once too many. */
	for (unsigned i = 0; i < SINGLE_KEYS; i += 2) {
		CHECK(skiplist_delete(&list, keys[i], &v) && v == keys[i] * 10, "delete %llu",
		      (unsigned long long)keys[i]);
		CHECK(!skiplist_delete(&list, keys[i], &v), "%llu deleted twice", (unsigned long long)keys[i]);
	}
	for (unsigned i = 0; i < SINGLE_KEYS; i++)
		CHECK(skiplist_lookup(&list, keys[i], NULL) == (i % 2 == 1), "key %llu after the deletes",
		      (unsigned long long)keys[i]);
	CHECK(skiplist_check(&list, true, &n) && n == SINGLE_KEYS / 2, "order after deletes, %zu keys", n);
	n = skiplist_scan(&list, 0, got, NULL, SINGLE_KEYS);
	for (unsigned i = 1; i < n; i++)
		CHECK(got[i - 1] < got[i], "scan out of order after deletes");

	/* The ends of the key space are keys like any other. */
	CHECK(skiplist_insert(&list, 0, 7, rng) == 0 && skiplist_insert(&list, UINT64_MAX, 8, ~rng) == 0, "ends");
	CHECK(skiplist_lookup(&list, 0, &v) && v == 7 && skiplist_lookup(&list, UINT64_MAX, &v) && v == 8, "ends");
	CHECK(skiplist_scan(&list, UINT64_MAX, got, vals, 4) == 1 && vals[0] == 8, "scan from the top");
	CHECK(skiplist_scan(&list, 0, got, NULL, 1) == 1 && got[0] == 0, "scan from 0");
	CHECK(skiplist_delete(&list, 0, NULL) && skiplist_delete(&list, UINT64_MAX, NULL), "ends deleted");

	/* Deleted keys come back with new values; then everything goes. */
	for (unsigned i = 0; i < SINGLE_KEYS; i += 2)
		CHECK(skiplist_insert(&list, keys[i], keys[i] + 5, rng += 0x9e3779b97f4a7c15ull) == 0, "reinsert");
	for (unsigned i = 0; i < SINGLE_KEYS; i++)
		CHECK(skiplist_delete(&list, keys[i], &v) && v == (i % 2 ? keys[i] * 10 : keys[i] + 5),
		      "final delete of %llu", (unsigned long long)keys[i]);
	CHECK(skiplist_check(&list, true, &n) && n == 0, "%zu keys left", n);
	skiplist_destroy(&list);
	printf("PASS skiplist single-threaded (%d keys)\n", SINGLE_KEYS);
}

static void checker(struct stress_worker *w)
{
	uint64_t got[64];
	long n = 0;
	while (stress_running(w)) {
		CHECK(skiplist_check(&list, false, NULL), "a level out of order");
		size_t k = skiplist_scan(&list, stress_rand(w) % 4096, got, NULL, 64);
		for (size_t i = 1; i < k; i++)
			CHECK(got[i - 1] < got[i], "scan out of order: %llu then %llu", (unsigned long long)got[i - 1],
			      (unsigned long long)got[i]);
		n++;
	}
	atomic_fetch_add(&checks, n);
}

static uint64_t private_key(unsigned owner, unsigned j)
{
	return interleaved ? (uint64_t)j * nthreads + owner : (uint64_t)owner * PRIVATE_KEYS + j;
}

static int map_insert(uint64_t key, uint64_t value, uint64_t random)
{
	return skiplist_insert(&list, key, value, random);
}

static bool map_lookup(uint64_t key, uint64_t *value)
{
	return skiplist_lookup(&list, key, value);
}

static bool map_remove(uint64_t key, uint64_t *value)
{
	return skiplist_delete(&list, key, value);
}

static const struct keymap_ops map = { .insert = map_insert, .lookup = map_lookup, .remove = map_remove };

static void private_body(struct stress_worker *w)
{
	uint64_t *mine = states[w->id], seq = 0;
	long n = 0;
	rcu_register_thread();
	if (w->id == 0)
		checker(w);
	while (w->id && stress_running(w)) {
		unsigned j = (unsigned)(stress_rand(w) % PRIVATE_KEYS);
		uint64_t r = stress_rand(w);
		keymap_private_step(w, &map, private_key(w->id, j), &mine[j], &seq, r);
		n++;
		if (r % 4096 == 0)
			stress_migrate(w);
	}
	rcu_unregister_thread();
	atomic_fetch_add(&ops, n);
}

static void run_private(struct stress_worker *w)
{
	size_t n, expect = 0;
	CHECK(skiplist_init(&list) == 0, "init");
	states = calloc(nthreads, sizeof(*states));
	CHECK(states, "out of memory");
	stress_run(nthreads, stress_seconds(), private_body, NULL, w);
	for (unsigned t = 1; t < nthreads; t++)
		for (unsigned j = 0; j < PRIVATE_KEYS; j++) {
			keymap_private_final(&map, private_key(t, j), t, states[t][j]);
			expect += states[t][j] != 0;
		}
	CHECK(skiplist_check(&list, true, &n) && n == expect, "final order, %zu keys for %zu", n, expect);
	skiplist_destroy(&list);
	free(states);
	printf("PASS skiplist private %s keys (%u threads on %u CPUs)\n", interleaved ? "interleaved" : "range",
	       nthreads, stress_cpus());
}

static void shared_body(struct stress_worker *w)
{
	uint64_t seq = 0;
	long n = 0;
	rcu_register_thread();
	if (w->id == 0)
		checker(w);
	while (w->id && stress_running(w)) {
		unsigned k = (unsigned)(stress_rand(w) % KEYMAP_SHARED_KEYS);
		/* Four more bits of the height's word set with probability 3/4: towers of 4 levels on average. */
		uint64_t r = stress_rand(w), random = r | (stress_rand(w) & UINT64_C(0xf00000000));
		keymap_shared_step(w, &map, &shared, k, k, &seq, r, random);
		n++;
		if (r % 4096 == 0)
			stress_migrate(w);
	}
	rcu_unregister_thread();
	atomic_fetch_add(&ops, n);
}

static void run_shared(struct stress_worker *w)
{
	size_t n, expect;
	CHECK(skiplist_init(&list) == 0, "init");
	stress_run(nthreads, stress_seconds(), shared_body, NULL, w);
	uint64_t total = keymap_shared_final(&map, &shared, 0, &expect);
	CHECK(skiplist_check(&list, true, &n) && n == expect, "final order, %zu keys for %zu", n, expect);
	skiplist_destroy(&list);
	printf("PASS skiplist shared range: %llu inserts (%u threads on %u CPUs)\n", (unsigned long long)total,
	       nthreads, stress_cpus());
}

int main(void)
{
	rcu_register_thread();
	single();
	nthreads = stress_threads() + 1;	/* one checker besides */
	struct stress_worker *w = calloc(nthreads, sizeof(*w));
	CHECK(w, "out of memory");
	interleaved = false;
	run_private(w);
	interleaved = true;
	run_private(w);
	run_shared(w);
	CHECK(atomic_load(&checks) > 3, "the checker ran only %ld times", atomic_load(&checks));
	printf("PASS skiplist: %ld operations, %ld checks of every level\n", atomic_load(&ops),
	       atomic_load(&checks));
	rcu_unregister_thread();
	free(w);
	return 0;
}
