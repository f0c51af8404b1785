/*
 * psearchy.h - pedsort, the Psearchy indexer (the paper's sections 3.6 and 5.7), and its query side.
 *
 * One worker per CPU shares a queue of the corpus's files, largest first. Phase 1: each worker reads
 * its files through stdio streams and records every word's positions in its own fixed-size table; when
 * the table is full it sorts the words and flushes them to an intermediate run. Phase 2: each worker
 * merges its own runs into a postings file and a sequence of Berkeley DB files mapping each word to
 * its record's byte offset, a new DB every `dblim` entries so total work does not depend on the core
 * count. Workers are threads of one process or processes (the paper's Stock + Threads and + Procs).
 *
 * An index is a directory:
 *   manifest          text: format, corpus root, file count, workers and each worker's DB count
 *   files.db          Berkeley DB (btree): file id (uint32) -> path relative to the corpus root
 *   w<k>/postings     records: word '\0', uint32 count, count x struct ps_posting, ascending
 *   w<k>/words-<s>.db Berkeley DB (btree): word -> uint64 offset of its record in w<k>/postings
 * It is built under a temporary name and renamed into place only when complete.
 */
#ifndef PSEARCHY_H
#define PSEARCHY_H

#include <stddef.h>
#include <stdint.h>

/* Longest indexed word. A word is a maximal run of ASCII letters and digits, lower-cased; longer
 * runs (hex blobs, base64) are not indexed. */
#define PS_MAX_WORD 100

struct ps_posting {
	uint32_t file;	/* file id: the file's place in the queue */
	uint32_t off;	/* byte offset of the word's first character in the file */
};

/* The corpus: its regular files, largest first (ties by path, so ids are reproducible). */
struct ps_corpus {
	char *root;
	size_t n;
	char **paths;	/* relative to root */
	uint64_t *sizes;
	uint64_t bytes;
};

enum ps_mode { PS_THREADS, PS_PROCS };

struct ps_options {
	const char *out;	/* index directory to create; must not exist */
	const int *cpus;	/* one worker per CPU, pinned */
	unsigned ncpus;
	enum ps_mode mode;
	size_t mem_bytes;	/* each worker's phase-1 table */
	unsigned dblim;		/* entries per Berkeley DB */
};

struct ps_stats {
	double job_s, phase1_s, phase2_s;	/* phases: the slowest worker's */
	uint64_t files, bytes, words;		/* words: occurrences indexed */
	uint64_t entries;			/* word entries in the DBs (a word once per worker holding it) */
	uint64_t flushes, runs_merged, dbs, postings_bytes;
	unsigned merge_passes;			/* the most any worker needed */
	uint64_t minor_faults, major_faults;
};

/* Error reporting: functions that can fail return 0 or -1 and leave one line in err. */
#define PS_ERR_LEN 512

int ps_corpus_load(const char *root, struct ps_corpus *c, char *err);
void ps_corpus_free(struct ps_corpus *c);

/* Builds the index; on failure nothing is left at opt->out and no worker outlives the call. */
int ps_index(const struct ps_corpus *c, const struct ps_options *opt, struct ps_stats *st, char *err);

/* Asks the index to stop early (from a signal handler): ps_index then fails with "interrupted". */
void ps_interrupt(void);

struct ps_index;
struct ps_hit {
	const char *path;	/* full path, owned by the hit list */
	uint32_t off;
};

int ps_open(const char *dir, struct ps_index **ix, char *err);
/* All places `word` occurs, by path then offset; *hits is malloc'd (free with ps_hits_free). */
int ps_lookup(struct ps_index *ix, const char *word, struct ps_hit **hits, size_t *n, char *err);
void ps_hits_free(struct ps_hit *hits, size_t n);
void ps_close(struct ps_index *ix);

/* Lower-cased word character, or 0 for a separator. */
extern const unsigned char ps_wordchar[256];

#endif
