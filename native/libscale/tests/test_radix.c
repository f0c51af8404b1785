/*
 * The page-table radix tree. Single-threaded first: the bounds (36-bit keys, the one value that cannot
 * be stored), every key found with its value, duplicates refused, deleted keys gone, and the shape: the
 * nodes a key needs and no more, none freed by a delete. Then threads:
 *   install  threads released together insert neighbouring keys into an empty tree, all needing the
 *            same three missing nodes: exactly those get installed (the losers free theirs: LSan
 *            would find one kept), and every key is there;
 *   private  each thread owns a set of keys (a range of its own, 700 keys so that ranges share leaves,
 *            across a top-level boundary; then keys interleaved with the other threads') and must see
 *            exactly its own state, as in the skip list's test;
 *   shared   every thread inserts, looks up and deletes a few keys of one range; each success is
 *            counted per key, and at the end what is present must be inserts minus deletes, key by key,
 *            values included.
 */
#include "scale/radix.h"
#include "keymap.h"

#include <errno.h>

#define SINGLE_KEYS 5000
#define PRIVATE_KEYS 700
#define INSTALL_ROUNDS 200

/* A top-level boundary (bit 27) in the middle of the private ranges. */
#define PRIVATE_BASE ((UINT64_C(5) << 27) - 2000)
#define SHARED_BASE (RADIX_KEY_LIMIT - 64)

static struct radix tree;
static unsigned nthreads;
static bool interleaved;
static uint64_t (*states)[PRIVATE_KEYS];
static struct keymap_shared shared;
static _Atomic long ops;

static void single(void)
{
	static uint64_t keys[SINGLE_KEYS];
	uint64_t v;

	CHECK(radix_init(&tree) == 0 && radix_nodes(&tree) == 1, "init: a root and nothing else");
	CHECK(radix_insert(&tree, RADIX_KEY_LIMIT, 1) == EINVAL && radix_insert(&tree, UINT64_MAX, 1) == EINVAL,
	      "a key beyond 36 bits accepted");
	CHECK(radix_insert(&tree, 5, RADIX_NO_VALUE) == EINVAL, "the reserved value accepted");
	CHECK(!radix_lookup(&tree, RADIX_KEY_LIMIT, &v) && !radix_delete(&tree, RADIX_KEY_LIMIT, &v),
	      "a key beyond 36 bits found");
	CHECK(radix_nodes(&tree) == 1, "a refused insert installed nodes");

	/* Shape: a key needs a path of three nodes below the root; neighbours share it. */
	CHECK(radix_insert(&tree, 0, 0) == 0 && radix_nodes(&tree) == 4, "first key: %zu nodes", radix_nodes(&tree));
	CHECK(radix_insert(&tree, 511, 1) == 0 && radix_nodes(&tree) == 4, "same leaf");
	CHECK(radix_insert(&tree, 512, 2) == 0 && radix_nodes(&tree) == 5, "next leaf");
	CHECK(radix_insert(&tree, UINT64_C(1) << 18, 3) == 0 && radix_nodes(&tree) == 7, "next level-1 node");
	CHECK(radix_insert(&tree, UINT64_C(1) << 27, 4) == 0 && radix_nodes(&tree) == 10, "next level-2 node");
	CHECK(radix_insert(&tree, RADIX_KEY_LIMIT - 1, RADIX_NO_VALUE - 1) == 0 && radix_nodes(&tree) == 13,
	      "the last key");
	CHECK(radix_lookup(&tree, 0, &v) && v == 0, "value 0 is a value");
	CHECK(radix_lookup(&tree, RADIX_KEY_LIMIT - 1, &v) && v == RADIX_NO_VALUE - 1, "the last key's value");
	CHECK(!radix_lookup(&tree, 1, NULL) && !radix_lookup(&tree, UINT64_C(1) << 30, NULL), "absent keys found");
	CHECK(!radix_delete(&tree, UINT64_C(1) << 30, NULL) && radix_nodes(&tree) == 13,
	      "a delete under a missing node installed one");
	CHECK(radix_delete(&tree, UINT64_C(1) << 27, &v) && v == 4 && radix_nodes(&tree) == 13,
	      "a delete freed nodes");
	radix_destroy(&tree);

	CHECK(radix_init(&tree) == 0, "init");
	for (unsigned i = 0; i < SINGLE_KEYS; i++) {
		/* Scattered over the whole key space, in a scrambled order. */
		keys[i] = ((uint64_t)(i * 7919u % SINGLE_KEYS) * 0x9e3779b97ull) % RADIX_KEY_LIMIT;
		CHECK(radix_insert(&tree, keys[i], keys[i] ^ 0x5a5a) == 0, "insert %llu", (unsigned long long)keys[i]);
	}
	for (unsigned i = 0; i < SINGLE_KEYS; i++) {
		CHECK(radix_insert(&tree, keys[i], 1) == EEXIST, "duplicate %llu accepted", (unsigned long long)keys[i]);
		CHECK(radix_lookup(&tree, keys[i], &v) && v == (keys[i] ^ 0x5a5a), "key %llu: lost or changed",
		      (unsigned long long)keys[i]);
	}
	for (unsigned i = 0; i < SINGLE_KEYS; i += 2) {
		CHECK(radix_delete(&tree, keys[i], &v) && v == (keys[i] ^ 0x5a5a), "delete %llu",
		      (unsigned long long)keys[i]);
		CHECK(!radix_delete(&tree, keys[i], &v), "%llu deleted twice", (unsigned long long)keys[i]);
	}
	for (unsigned i = 0; i < SINGLE_KEYS; i++)
		CHECK(radix_lookup(&tree, keys[i], NULL) == (i % 2 == 1), "key %llu after the deletes",
		      (unsigned long long)keys[i]);
	for (unsigned i = 0; i < SINGLE_KEYS; i += 2)
		CHECK(radix_insert(&tree, keys[i], i) == 0 && radix_lookup(&tree, keys[i], &v) && v == i, "reinsert");
	radix_destroy(&tree);
	printf("PASS radix single-threaded (%d keys)\n", SINGLE_KEYS);
}

struct install {
	pthread_barrier_t start, done;
	unsigned nthreads;
};

static void *installer(void *p)
{
	struct install *in = p;
	static _Atomic unsigned next_id;
	unsigned id = atomic_fetch_add(&next_id, 1) % in->nthreads;
	for (int round = 0; round < INSTALL_ROUNDS; round++) {
		pthread_barrier_wait(&in->start);
		/* Keys of one leaf, the first of a level-2 node: the three nodes above are all missing. */
		CHECK(radix_insert(&tree, (UINT64_C(3) << 27) + id, id) == 0, "thread %u: insert", id);
		pthread_barrier_wait(&in->done);
	}
	return NULL;
}

static void run_install(void)
{
	struct install in = { .nthreads = stress_threads() };
	pthread_t th[64];
	uint64_t v;
	CHECK(pthread_barrier_init(&in.start, NULL, in.nthreads + 1) == 0 &&
		      pthread_barrier_init(&in.done, NULL, in.nthreads + 1) == 0,
	      "barriers");
	for (unsigned i = 0; i < in.nthreads; i++)
		CHECK(pthread_create(&th[i], NULL, installer, &in) == 0, "pthread_create");
	for (int round = 0; round < INSTALL_ROUNDS; round++) {
		CHECK(radix_init(&tree) == 0, "init");
		pthread_barrier_wait(&in.start);
		pthread_barrier_wait(&in.done);
		CHECK(radix_nodes(&tree) == 4, "round %d: %zu nodes installed for one leaf", round, radix_nodes(&tree));
		for (unsigned id = 0; id < in.nthreads; id++)
			CHECK(radix_lookup(&tree, (UINT64_C(3) << 27) + id, &v) && v == id, "round %d: key %u lost", round,
			      id);
		radix_destroy(&tree);
	}
	for (unsigned i = 0; i < in.nthreads; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&in.start);
	pthread_barrier_destroy(&in.done);
	printf("PASS radix install races: %d rounds of %u threads\n", INSTALL_ROUNDS, in.nthreads);
}

static uint64_t private_key(unsigned owner, unsigned j)
{
	return PRIVATE_BASE + (interleaved ? (uint64_t)j * nthreads + owner : (uint64_t)owner * PRIVATE_KEYS + j);
}

static int map_insert(uint64_t key, uint64_t value, uint64_t random)
{
	(void)random;
	return radix_insert(&tree, key, value);
}

static bool map_lookup(uint64_t key, uint64_t *value)
{
	return radix_lookup(&tree, key, value);
}

static bool map_remove(uint64_t key, uint64_t *value)
{
	return radix_delete(&tree, key, value);
}

static const struct keymap_ops map = { .insert = map_insert, .lookup = map_lookup, .remove = map_remove };

static void private_body(struct stress_worker *w)
{
	uint64_t *mine = states[w->id], seq = 0;
	long n = 0;
	while (stress_running(w)) {
		unsigned j = (unsigned)(stress_rand(w) % PRIVATE_KEYS);
		uint64_t r = stress_rand(w);
		keymap_private_step(w, &map, private_key(w->id, j), &mine[j], &seq, r);
		n++;
		if (r % 4096 == 0)
			stress_migrate(w);
	}
	atomic_fetch_add(&ops, n);
}

static void run_private(struct stress_worker *w)
{
	CHECK(radix_init(&tree) == 0, "init");
	states = calloc(nthreads, sizeof(*states));
	CHECK(states, "out of memory");
	stress_run(nthreads, stress_seconds(), private_body, NULL, w);
	for (unsigned t = 0; t < nthreads; t++)
		for (unsigned j = 0; j < PRIVATE_KEYS; j++)
			keymap_private_final(&map, private_key(t, j), t, states[t][j]);
	radix_destroy(&tree);
	free(states);
	printf("PASS radix private %s keys (%u threads on %u CPUs)\n", interleaved ? "interleaved" : "range",
	       nthreads, stress_cpus());
}

static void shared_body(struct stress_worker *w)
{
	uint64_t seq = 0;
	long n = 0;
	while (stress_running(w)) {
		unsigned k = (unsigned)(stress_rand(w) % KEYMAP_SHARED_KEYS);
		uint64_t r = stress_rand(w);
		keymap_shared_step(w, &map, &shared, k, SHARED_BASE + k, &seq, r, r);
		n++;
		if (r % 4096 == 0)
			stress_migrate(w);
	}
	atomic_fetch_add(&ops, n);
}

static void run_shared(struct stress_worker *w)
{
	size_t present;
	CHECK(radix_init(&tree) == 0, "init");
	stress_run(nthreads, stress_seconds(), shared_body, NULL, w);
	uint64_t total = keymap_shared_final(&map, &shared, SHARED_BASE, &present);
	CHECK(radix_nodes(&tree) == 4, "%zu nodes for one leaf's keys", radix_nodes(&tree));
	radix_destroy(&tree);
	printf("PASS radix shared range: %llu inserts (%u threads on %u CPUs)\n", (unsigned long long)total,
	       nthreads, stress_cpus());
}

int main(void)
{
	single();
	run_install();
	nthreads = stress_threads();
	struct stress_worker *w = calloc(nthreads, sizeof(*w));
	CHECK(w, "out of memory");
	interleaved = false;
	run_private(w);
	interleaved = true;
	run_private(w);
	run_shared(w);
	printf("PASS radix: %ld operations\n", atomic_load(&ops));
	free(w);
	return 0;
}
