/*
 * The Metis runtime: map into per-worker partitioned tables, reduce a partition per task, merge the
 * sorted partitions in a parallel tree. See metis.h for the design.
 */
#include "metis/metis.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define DEFAULT_CHUNK (1UL << 20)
#define FIRST_CAPACITY 64

struct entry {
	const char *key;	/* NULL: an empty slot */
	uint64_t hash;
	uint32_t keylen;
	uint32_t n;		/* values held (METIS_LIST) */
	uint32_t cap;
	uint64_t sum;		/* METIS_SUM */
	uint64_t *values;	/* METIS_LIST */
};

struct table {
	struct entry *slots;
	uint32_t mask;		/* capacity - 1, a power of two */
	uint32_t count;
};

struct metis_worker {
	struct metis_state *st;
	unsigned id;
	struct metis_arena *arena;
	struct table *parts;	/* one per partition */
	uint64_t moved;		/* bytes this worker's reduce tasks read and wrote */
	int err;
};

/* A run of sorted pairs: a partition's output, then the merge tree's intermediate results. */
struct run {
	struct metis_pair **pairs;
	size_t n;
};

struct metis_state {
	const struct metis_job *job;
	unsigned nworkers, nparts;
	size_t chunk;
	struct metis_worker *workers;
	pthread_barrier_t barrier;
	/* Workers wait here until every one exists: 1 go, -1 give up (a thread could not be made). */
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
	int gate;
	_Atomic size_t next_chunk;
	_Atomic unsigned next_task;
	struct run *runs, *merged;	/* merge rounds read runs and write merged, then swap */
	unsigned nruns;
	unsigned merge_pieces;		/* per pair of runs in the current round */
	double t_map, t_reduce, t_merge;
	struct metis_result *out;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* FNV-1a, then a final mix so partition and slot bits are both well spread. */
static uint64_t hash_key(const char *key, uint32_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static int table_init(struct table *t, struct metis_arena *a, uint32_t capacity)
{
	t->slots = metis_arena_alloc(a, (size_t)capacity * sizeof(*t->slots));
	if (!t->slots)
		return ENOMEM;
	memset(t->slots, 0, (size_t)capacity * sizeof(*t->slots));
	t->mask = capacity - 1;
	t->count = 0;
	return 0;
}

static struct entry *table_slot(struct table *t, uint64_t hash, const char *key, uint32_t len)
{
	for (uint32_t i = (uint32_t)hash & t->mask;; i = (i + 1) & t->mask) {
		struct entry *e = &t->slots[i];
		if (!e->key || (e->hash == hash && e->keylen == len && !memcmp(e->key, key, len)))
			return e;
	}
}

static int table_grow(struct table *t, struct metis_arena *a)
{
	struct table bigger;
	int err = table_init(&bigger, a, (t->mask + 1) * 2);
	if (err)
		return err;
	for (uint32_t i = 0; i <= t->mask; i++) {
		struct entry *e = &t->slots[i];
		if (e->key)
			*table_slot(&bigger, e->hash, e->key, e->keylen) = *e;
	}
	bigger.count = t->count;
	*t = bigger;	/* the old array stays in the arena until the job ends */
	return 0;
}

static int push_value(struct entry *e, struct metis_arena *a, uint64_t value)
{
	if (e->n == e->cap) {
		uint32_t cap = e->cap ? e->cap * 2 : 2;
		uint64_t *v = metis_arena_alloc(a, (size_t)cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		if (e->n)
			memcpy(v, e->values, (size_t)e->n * sizeof(*v));
		e->values = v;
		e->cap = cap;
	}
	e->values[e->n++] = value;
	return 0;
}

/* Finds or adds key in t; grows t at 50% load. Returns NULL when memory ran out. */
static struct entry *table_upsert(struct table *t, struct metis_arena *a, uint64_t hash, const char *key,
				  uint32_t len)
{
	if ((t->count + 1) * 2 > t->mask + 1 && table_grow(t, a))
		return NULL;
	struct entry *e = table_slot(t, hash, key, len);
	if (!e->key) {
		*e = (struct entry){ .key = key, .hash = hash, .keylen = len };
		t->count++;
	}
	return e;
}

void metis_emit(struct metis_worker *w, const char *key, uint32_t keylen, uint64_t value)
{
	struct metis_state *st = w->st;
	uint64_t h = hash_key(key, keylen);
	struct table *t = &w->parts[(h >> 32) % st->nparts];
	struct entry *e;

	if (w->err)
		return;
	if (!(e = table_upsert(t, w->arena, h, key, keylen))) {
		w->err = ENOMEM;
		return;
	}
	if (st->job->app->combine == METIS_SUM) {
		e->sum += value;
		e->n = 1;
	} else if (push_value(e, w->arena, value)) {
		w->err = ENOMEM;
	}
}

static void map_phase(struct metis_worker *w)
{
	struct metis_state *st = w->st;
	const struct metis_job *job = st->job;
	for (;;) {
		size_t start = atomic_fetch_add(&st->next_chunk, st->chunk);
		if (start >= job->input_len)
			return;
		/*
		 * A chunk owns the words that start inside it: skip the tail of a word begun before it (which
		 * may run past its end, when a word is longer than a chunk), finish the last word it begins.
		 */
		size_t end = start + st->chunk < job->input_len ? start + st->chunk : job->input_len;
		size_t from = start;
		if (from > 0)
			while (from < job->input_len && metis_word_char((unsigned char)job->input[from - 1]) &&
			       metis_word_char((unsigned char)job->input[from]))
				from++;
		if (from >= end)
			continue;
		size_t to = end;
		while (to < job->input_len && metis_word_char((unsigned char)job->input[to - 1]) &&
		       metis_word_char((unsigned char)job->input[to]))
			to++;
		if (from < to)
			job->app->map(w, job->input + from, to - from, from);
		if (w->err)
			return;
	}
}

static int cmp_key(const struct metis_pair *a, const struct metis_pair *b)
{
	uint32_t n = a->keylen < b->keylen ? a->keylen : b->keylen;
	int c = memcmp(a->key, b->key, n);
	return c ? c : (a->keylen > b->keylen) - (a->keylen < b->keylen);
}

static int cmp_pair(const void *a, const void *b)
{
	return cmp_key(*(struct metis_pair *const *)a, *(struct metis_pair *const *)b);
}

/*
 * Sorts v[0..n), made of ascending runs (one per map worker: a worker takes chunks in input order),
 * by merging neighbouring runs pairwise: O(n log runs) instead of a full sort's O(n log n).
 */
static void merge_runs(uint64_t *v, size_t n, uint64_t *tmp)
{
	for (;;) {
		size_t out = 0, runs = 0;
		for (size_t i = 0; i < n; runs++) {
			size_t mid = i + 1;
			while (mid < n && v[mid - 1] <= v[mid])
				mid++;
			size_t end = mid < n ? mid + 1 : n;	/* the next run, if any */
			while (end < n && v[end - 1] <= v[end])
				end++;
			size_t a = i, b = mid;
			while (a < mid && b < end)
				tmp[out++] = v[a] <= v[b] ? v[a++] : v[b++];
			while (a < mid)
				tmp[out++] = v[a++];
			while (b < end)
				tmp[out++] = v[b++];
			i = end;
		}
		memcpy(v, tmp, n * sizeof(*v));
		if (runs <= 1)
			return;
	}
}

/* Reduces partition r: merges every map worker's table r, combines, sorts. */
static int reduce_partition(struct metis_worker *w, unsigned r)
{
	struct metis_state *st = w->st;
	bool sum = st->job->app->combine == METIS_SUM;
	uint32_t total = 0;
	for (unsigned i = 0; i < st->nworkers; i++)
		total += st->workers[i].parts[r].count;
	uint32_t cap = FIRST_CAPACITY;
	while (cap < total * 2)
		cap *= 2;
	struct table merged;
	int err = table_init(&merged, w->arena, cap);
	if (err)
		return err;
	/* Pass 1: every key once, with its sum or its total number of values. */
	for (unsigned i = 0; i < st->nworkers; i++) {
		struct table *t = &st->workers[i].parts[r];
		w->moved += (uint64_t)(t->mask + 1) * sizeof(struct entry);
		for (uint32_t s = 0; s <= t->mask; s++) {
			struct entry *src = &t->slots[s];
			if (!src->key)
				continue;
			struct entry *dst = table_upsert(&merged, w->arena, src->hash, src->key, src->keylen);
			if (!dst)
				return ENOMEM;
			if (sum) {
				dst->sum += src->sum;
				dst->n = 1;
			} else {
				dst->cap += src->n;
			}
		}
	}
	size_t longest = 0;
	if (!sum) {
		/* Pass 2: each key's values copied whole into an array of exactly the right size. */
		for (uint32_t s = 0; s <= merged.mask; s++) {
			struct entry *e = &merged.slots[s];
			if (e->key && !(e->values = metis_arena_alloc(w->arena, (size_t)e->cap * sizeof(uint64_t))))
				return ENOMEM;
			if (e->key && e->cap > longest)
				longest = e->cap;
		}
		for (unsigned i = 0; i < st->nworkers; i++) {
			struct table *t = &st->workers[i].parts[r];
			for (uint32_t s = 0; s <= t->mask; s++) {
				struct entry *src = &t->slots[s];
				if (!src->key)
					continue;
				struct entry *dst = table_slot(&merged, src->hash, src->key, src->keylen);
				memcpy(dst->values + dst->n, src->values, (size_t)src->n * sizeof(uint64_t));
				dst->n += src->n;
				w->moved += (uint64_t)src->n * sizeof(uint64_t) * 2;
			}
		}
	}
	uint64_t *tmp = longest > 1 ? metis_arena_alloc(w->arena, longest * sizeof(uint64_t)) : NULL;
	if (longest > 1 && !tmp)
		return ENOMEM;
	struct metis_pair **pairs = metis_arena_alloc(w->arena, (size_t)(merged.count + 1) * sizeof(*pairs));
	struct metis_pair *store = metis_arena_alloc(w->arena, (size_t)(merged.count + 1) * sizeof(*store));
	if (!pairs || !store)
		return ENOMEM;
	size_t n = 0;
	for (uint32_t s = 0; s <= merged.mask; s++) {
		struct entry *e = &merged.slots[s];
		if (!e->key)
			continue;
		if (sum)
			e->values = &e->sum;
		else if (e->n > 1)
			merge_runs(e->values, e->n, tmp);
		store[n] = (struct metis_pair){ .key = e->key, .keylen = e->keylen, .nvalues = e->n,
						.values = e->values };
		pairs[n] = &store[n];
		n++;
	}
	qsort(pairs, n, sizeof(*pairs), cmp_pair);
	w->moved += (uint64_t)n * (sizeof(*store) + sizeof(*pairs));
	st->runs[r] = (struct run){ .pairs = pairs, .n = n };
	return 0;
}

/* How many of a's first k elements precede the k-th output of merging a and b (merge path). */
static size_t split_point(const struct run *a, const struct run *b, size_t k)
{
	size_t lo = k > b->n ? k - b->n : 0, hi = k < a->n ? k : a->n;
	while (lo < hi) {
		size_t i = (lo + hi) / 2;	/* take i from a and k - i from b */
		if (cmp_key(a->pairs[i], b->pairs[k - i - 1]) <= 0)
			lo = i + 1;
		else
			hi = i;
	}
	return lo;
}

/* Merges piece p (of st->merge_pieces) of the pair of runs (2q, 2q + 1) into merged[q]. */
static void merge_piece(struct metis_state *st, unsigned q, unsigned p)
{
	struct run *a = &st->runs[2 * q], *b = &st->runs[2 * q + 1], *out = &st->merged[q];
	size_t total = a->n + b->n;
	size_t k0 = total * p / st->merge_pieces, k1 = total * (p + 1) / st->merge_pieces;
	size_t i = split_point(a, b, k0), j = k0 - i;
	size_t i1 = split_point(a, b, k1), j1 = k1 - i1;
	size_t k = k0;
	while (i < i1 && j < j1)
		out->pairs[k++] = cmp_key(a->pairs[i], b->pairs[j]) <= 0 ? a->pairs[i++] : b->pairs[j++];
	while (i < i1)
		out->pairs[k++] = a->pairs[i++];
	while (j < j1)
		out->pairs[k++] = b->pairs[j++];
}

/* Worker 0 prepares each merge round between barriers; every worker then takes pieces. */
static int prepare_round(struct metis_state *st)
{
	unsigned pairs = st->nruns / 2;
	for (unsigned q = 0; q < pairs; q++) {
		size_t n = st->runs[2 * q].n + st->runs[2 * q + 1].n;
		st->merged[q].n = n;
		st->merged[q].pairs = metis_arena_alloc(st->workers[0].arena, (n + 1) * sizeof(struct metis_pair *));
		if (!st->merged[q].pairs)
			return ENOMEM;
	}
	if (st->nruns % 2)
		st->merged[pairs] = st->runs[st->nruns - 1];
	st->merge_pieces = (st->nworkers + pairs - 1) / pairs;
	atomic_store(&st->next_task, 0);
	return 0;
}

static void finish_round(struct metis_state *st)
{
	struct run *t = st->runs;
	st->runs = st->merged;
	st->merged = t;
	st->nruns = (st->nruns + 1) / 2;
}

struct worker_start {
	struct metis_worker *w;
	int cpu;
};

static void *worker_main(void *arg)
{
	struct worker_start *ws = arg;
	struct metis_worker *w = ws->w;
	struct metis_state *st = w->st;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(ws->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		w->err = errno;

	pthread_mutex_lock(&st->gate_lock);
	while (!st->gate)
		pthread_cond_wait(&st->gate_cond, &st->gate_lock);
	int gate = st->gate;
	pthread_mutex_unlock(&st->gate_lock);
	if (gate < 0)
		return NULL;

	pthread_barrier_wait(&st->barrier);
	if (w->id == 0)
		st->t_map = now_s();
	if (!w->err)
		map_phase(w);

	pthread_barrier_wait(&st->barrier);
	if (w->id == 0)
		st->t_reduce = now_s();
	for (unsigned r; (r = atomic_fetch_add(&st->next_task, 1)) < st->nparts && !w->err;)
		w->err = reduce_partition(w, r);

	pthread_barrier_wait(&st->barrier);
	if (w->id == 0)
		st->t_merge = now_s();
	for (;;) {
		/* Worker 0 decides the round alone; the barrier publishes its decision to the others. */
		if (w->id == 0 && st->nruns > 1 && !w->err)
			w->err = prepare_round(st);
		pthread_barrier_wait(&st->barrier);
		if (st->nruns <= 1 || st->workers[0].err)
			break;
		unsigned tasks = (st->nruns / 2) * st->merge_pieces;
		for (unsigned t; (t = atomic_fetch_add(&st->next_task, 1)) < tasks;)
			merge_piece(st, t / st->merge_pieces, t % st->merge_pieces);
		pthread_barrier_wait(&st->barrier);
		if (w->id == 0)
			finish_round(st);
	}
	return NULL;
}

const struct metis_arena *metis_state_arena(const struct metis_state *st)
{
	return st->workers[0].arena;
}

void metis_free(struct metis_state *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->nworkers; i++)
		metis_arena_destroy(st->workers[i].arena);
	free(st->workers);
	free(st->runs < st->merged ? st->runs : st->merged);	/* one allocation holds both */
	free(st);
}

int metis_run(const struct metis_job *job, struct metis_result *out, struct metis_state **state)
{
	if (!job->ncpus || !job->app || (!job->input && job->input_len))
		return EINVAL;
	struct metis_state *st = calloc(1, sizeof(*st));
	if (!st)
		return ENOMEM;
	*state = st;
	st->job = job;
	st->nworkers = job->ncpus;
	st->nparts = job->partitions ? job->partitions : 4 * job->ncpus;
	st->chunk = job->chunk ? job->chunk : DEFAULT_CHUNK;
	st->out = out;
	memset(out, 0, sizeof(*out));
	st->workers = calloc(st->nworkers, sizeof(*st->workers));
	struct run *runs = calloc(2 * (size_t)st->nparts, sizeof(*runs));
	struct worker_start *starts = calloc(st->nworkers, sizeof(*starts));
	pthread_t *threads = calloc(st->nworkers, sizeof(*threads));
	int err = 0;
	if (!st->workers || !runs || !starts || !threads) {
		free(runs);
		err = ENOMEM;
		goto out;
	}
	st->runs = runs;
	st->merged = runs + st->nparts;
	st->nruns = st->nparts;
	for (unsigned i = 0; i < st->nworkers && !err; i++) {
		struct metis_worker *w = &st->workers[i];
		*w = (struct metis_worker){ .st = st, .id = i, .arena = metis_arena_create(job->pages) };
		w->parts = w->arena ? metis_arena_alloc(w->arena, st->nparts * sizeof(*w->parts)) : NULL;
		if (!w->parts)
			err = ENOMEM;
		for (unsigned p = 0; p < st->nparts && !err; p++)
			err = table_init(&w->parts[p], w->arena, FIRST_CAPACITY);
	}
	if (err)
		goto out;

	struct rusage before, after;
	getrusage(RUSAGE_SELF, &before);
	pthread_barrier_init(&st->barrier, NULL, st->nworkers);
	pthread_mutex_init(&st->gate_lock, NULL);
	pthread_cond_init(&st->gate_cond, NULL);
	st->gate = 0;
	unsigned started = 0;
	for (; started < st->nworkers; started++) {
		starts[started] = (struct worker_start){ .w = &st->workers[started], .cpu = job->cpus[started] };
		if ((err = pthread_create(&threads[started], NULL, worker_main, &starts[started])))
			break;
	}
	/* The barrier counts every worker: without all of them nobody could pass it, so all go or none. */
	pthread_mutex_lock(&st->gate_lock);
	st->gate = started == st->nworkers ? 1 : -1;
	pthread_cond_broadcast(&st->gate_cond);
	pthread_mutex_unlock(&st->gate_lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	pthread_cond_destroy(&st->gate_cond);
	pthread_mutex_destroy(&st->gate_lock);
	double end = now_s();
	getrusage(RUSAGE_SELF, &after);
	pthread_barrier_destroy(&st->barrier);

	for (unsigned i = 0; i < st->nworkers && !err; i++)
		err = st->workers[i].err;
	if (!err) {
		out->pairs = st->runs[0].pairs;
		out->npairs = st->nruns ? st->runs[0].n : 0;
		out->map_s = st->t_reduce - st->t_map;
		out->reduce_s = st->t_merge - st->t_reduce;
		out->merge_s = end - st->t_merge;
		for (unsigned i = 0; i < st->nworkers; i++)
			out->reduce_bytes += st->workers[i].moved;
		out->minor_faults = (uint64_t)(after.ru_minflt - before.ru_minflt);
		out->major_faults = (uint64_t)(after.ru_majflt - before.ru_majflt);
	}
out:
	free(starts);
	free(threads);
	return err;
}
