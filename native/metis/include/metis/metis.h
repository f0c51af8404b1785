/*
 * metis.h - a MapReduce library for one multicore machine, after Metis (Mao, Morris, Kaashoek, 2010),
 * the library of the OSDI 2010 paper's section 3.7.
 *
 * A job runs in three phases, each on one thread per CPU of the job's CPU list:
 *   map     workers take input chunks from a shared cursor and call the application's map function,
 *           which emits (key, value) pairs. Each worker keeps its own table per reduce partition, so
 *           the map phase writes no shared memory: partition = hash(key) mod R.
 *   reduce  partition r is reduced by one worker, which merges the r-th table of every map worker,
 *           combines each key's values (sum, or the sorted list of them) and sorts its keys.
 *   merge   the R sorted partitions are merged in a parallel tree of pairwise merges into one sorted
 *           output.
 * Why per-worker hash tables rather than a shared table of b-trees (Metis's choice): with keys
 * spread by hash, a reducer reads R tables that no one writes any more, and no lock or atomic is
 * touched in the map phase; the price is one table per (worker, partition), which is why they grow
 * on demand and come from the job's arena.
 *
 * Memory: every large table comes from the job's arena (metis_arena), mapped in 4 KB pages or in
 * 2 MB huge pages (MAP_HUGETLB when the kernel has huge pages reserved, else transparent huge pages
 * through madvise): the paper's "Stock + 4 KB pages" against "PK + 2 MB pages".
 *
 * Functions return 0 or an errno and never print or exit.
 */
#ifndef METIS_H
#define METIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metis_pages { METIS_PAGES_4K, METIS_PAGES_2M };

/* How a key's values combine: one running sum (word count), or every value kept (inverted index). */
enum metis_combine { METIS_SUM, METIS_LIST };

struct metis_worker;

struct metis_app {
	const char *name;
	enum metis_combine combine;
	/*
	 * Maps one chunk of the input: data[0..len) lies at byte offset base of the whole input. Chunks
	 * end at whitespace, so a word never spans two. Calls metis_emit for each pair.
	 */
	void (*map)(struct metis_worker *w, const char *data, size_t len, uint64_t base);
};

void metis_emit(struct metis_worker *w, const char *key, uint32_t keylen, uint64_t value);

/* One key of the output: its values are sorted ascending (METIS_LIST) or one sum (METIS_SUM). */
struct metis_pair {
	const char *key;
	uint32_t keylen;
	uint32_t nvalues;
	uint64_t *values;
};

struct metis_result {
	struct metis_pair **pairs;	/* sorted by key (bytewise, shorter first on a tie) */
	size_t npairs;
	double map_s, reduce_s, merge_s;
	uint64_t reduce_bytes;		/* intermediate bytes the reduce phase read and wrote */
	uint64_t minor_faults, major_faults;
};

struct metis_job {
	const struct metis_app *app;
	const char *input;
	size_t input_len;
	const int *cpus;		/* one worker per CPU, pinned */
	unsigned ncpus;
	enum metis_pages pages;
	unsigned partitions;		/* 0: 4 per worker */
	size_t chunk;			/* 0: 1 MB */
};

struct metis_state;

/* Runs the job; the result lives until metis_free. Returns 0 or an errno. */
int metis_run(const struct metis_job *job, struct metis_result *out, struct metis_state **state);
void metis_free(struct metis_state *state);

/* The arena every large table of a job comes from. */
struct metis_arena;
struct metis_arena *metis_arena_create(enum metis_pages pages);
void *metis_arena_alloc(struct metis_arena *a, size_t size);
void metis_arena_destroy(struct metis_arena *a);
/* What the arena actually got: "4k", "2m-hugetlb" or "2m-thp". */
const char *metis_arena_kind(const struct metis_arena *a);
/* The arena of a job's first worker, to ask what pages the job got. */
const struct metis_arena *metis_state_arena(const struct metis_state *st);

/* A word character for the bundled applications: letters, digits and underscore. */
static inline bool metis_word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

extern const struct metis_app metis_wordcount;
extern const struct metis_app metis_invindex;

#endif
