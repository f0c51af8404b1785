/* internal.h - what pedsort's phases share: the phase-1 table, the merge, and the record format. */
#ifndef PSEARCHY_INTERNAL_H
#define PSEARCHY_INTERNAL_H

#include "psearchy/psearchy.h"

#include <db.h>
#include <stdio.h>

/* First bytes of a postings file; DB offsets point past it. */
#define PS_POSTINGS_MAGIC "PSRCHY01"
#define PS_POSTINGS_HEADER 8

/* A record is the word with its '\0', a uint32 count, then count postings ascending by (file, off). */
static inline uint64_t ps_record_bytes(unsigned len, uint32_t count)
{
	return len + 1 + sizeof(uint32_t) + (uint64_t)count * sizeof(struct ps_posting);
}

/* FNV-1a over the lower-cased word, computed by the tokenizer as it reads. */
#define PS_HASH_INIT 2166136261u
static inline uint32_t ps_hash_step(uint32_t h, unsigned char c)
{
	return (h ^ c) * 16777619u;
}

/* Phase 1: one worker's table of words and positions in a fixed amount of memory. */
struct ps_table;
struct ps_table *ps_table_new(size_t mem_bytes);
void ps_table_free(struct ps_table *t);
/* Returns 0, or 1 when the table is full: flush, then add again. */
int ps_table_add(struct ps_table *t, const char *word, unsigned len, uint32_t hash, uint32_t file, uint32_t off);
int ps_table_empty(const struct ps_table *t);
/* Writes every word in strcmp order as records to f, then empties the table. Returns 0 or an errno. */
int ps_table_flush(struct ps_table *t, FILE *f);

/* Phase 2's sink for the final merge: a new Berkeley DB every dblim entries. */
struct ps_dbs {
	const char *dir;
	unsigned dblim;
	DB *db;
	unsigned count;		/* entries in the open DB */
	unsigned ndbs;		/* DBs created so far */
	uint64_t entries;
};
int ps_dbs_put(struct ps_dbs *s, const char *word, unsigned len, uint64_t offset, char *err);
int ps_dbs_close(struct ps_dbs *s, char *err);

/* Merges the sorted runs in[0..n) (earlier runs hold earlier files) into out, concatenating the
 * postings of a word found in several. With dbs, records each word's offset in out, which starts at
 * `offset`. `stop` is polled so a failed or interrupted job ends early. */
struct ps_merge_stats {
	uint64_t words, bytes;
};
int ps_merge(FILE **in, const char *const *names, unsigned n, FILE *out, const char *out_name, uint64_t offset,
	     struct ps_dbs *dbs, int (*stop)(void *), void *stop_arg, struct ps_merge_stats *ms, char *err);

/* Opens a Berkeley DB btree quietly (errors come back as codes, reported once by the caller). */
int ps_db_open(DB **db, const char *path, int create);

#endif
