/*
 * table.c - phase 1's per-worker table. Positions are appended to one log in arrival order (so a
 * word's positions stay in file order without a per-word list), words sit in an open-addressing hash
 * table. A flush sorts the distinct words, scatters the log into word order with a counting pass, and
 * writes every word's record sequentially. The memory budget is split ahead of time: a quarter for
 * distinct words, the rest for positions; the table is full when either runs out.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint32_t word;		/* offset of the word in bytes[] */
	uint32_t len;
	uint32_t count;
	uint32_t cursor;	/* flush: next place of this word's postings in the scatter array */
};

struct logrec {
	uint32_t entry, file, off;
};

struct ps_table {
	uint64_t *slots;	/* hash << 32 | (entry index + 1); 0 is empty */
	uint32_t mask;
	struct entry *ent;
	uint32_t nent, maxent;
	char *bytes;
	size_t nbytes, maxbytes;
	struct logrec *log;
	size_t nlog, maxlog;
	struct ps_posting *scatter;
	uint32_t *order;
};

/* Budget per distinct word: two slots (load at most a half), the entry, its place in the sort, and
 * room for an average word. Per position: its log record and its place in the scatter array. */
#define WORD_COST (2 * sizeof(uint64_t) + sizeof(struct entry) + sizeof(uint32_t) + 12)
#define POSTING_COST (sizeof(struct logrec) + sizeof(struct ps_posting))

struct ps_table *ps_table_new(size_t mem_bytes)
{
	struct ps_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	size_t maxent = mem_bytes / 4 / WORD_COST, maxlog = mem_bytes / 4 * 3 / POSTING_COST;
	if (maxent < 64)
		maxent = 64;
	if (maxent > UINT32_MAX / 4)
		maxent = UINT32_MAX / 4;
	if (maxlog < 256)
		maxlog = 256;
	if (maxlog > UINT32_MAX)
		maxlog = UINT32_MAX;
	size_t nslots = 1;
	while (nslots < 2 * maxent)
		nslots <<= 1;
	t->mask = (uint32_t)(nslots - 1);
	t->maxent = (uint32_t)maxent;
	t->maxlog = maxlog;
	t->maxbytes = maxent * 12 + PS_MAX_WORD + 1;
	t->slots = calloc(nslots, sizeof(*t->slots));
	t->ent = malloc(maxent * sizeof(*t->ent));
	t->order = malloc(maxent * sizeof(*t->order));
	t->bytes = malloc(t->maxbytes);
	t->log = malloc(maxlog * sizeof(*t->log));
	t->scatter = malloc(maxlog * sizeof(*t->scatter));
	if (!t->slots || !t->ent || !t->order || !t->bytes || !t->log || !t->scatter) {
		ps_table_free(t);
		return NULL;
	}
	return t;
}

void ps_table_free(struct ps_table *t)
{
	if (!t)
		return;
	free(t->slots);
	free(t->ent);
	free(t->order);
	free(t->bytes);
	free(t->log);
	free(t->scatter);
	free(t);
}

int ps_table_empty(const struct ps_table *t)
{
	return t->nlog == 0;
}

/* FNV-1a's low bits are weak on short keys; the slot index comes from a finalised mix. */
static inline uint32_t slot_of(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

int ps_table_add(struct ps_table *t, const char *word, unsigned len, uint32_t hash, uint32_t file, uint32_t off)
{
	if (t->nlog == t->maxlog)
		return 1;
	uint32_t i = slot_of(hash) & t->mask;
	for (;; i = (i + 1) & t->mask) {
		uint64_t s = t->slots[i];
		if (!s)
			break;
		if ((uint32_t)(s >> 32) != hash)
			continue;
		struct entry *e = &t->ent[(uint32_t)s - 1];
		if (e->len == len && !memcmp(t->bytes + e->word, word, len)) {
			e->count++;
			t->log[t->nlog++] = (struct logrec){ (uint32_t)s - 1, file, off };
			return 0;
		}
	}
	if (t->nent == t->maxent || t->nbytes + len + 1 > t->maxbytes)
		return 1;
	uint32_t idx = t->nent++;
	t->ent[idx] = (struct entry){ .word = (uint32_t)t->nbytes, .len = len, .count = 1 };
	memcpy(t->bytes + t->nbytes, word, len);
	t->bytes[t->nbytes + len] = '\0';
	t->nbytes += len + 1;
	t->slots[i] = (uint64_t)hash << 32 | (idx + 1);
	t->log[t->nlog++] = (struct logrec){ idx, file, off };
	return 0;
}

static int by_word(const void *pa, const void *pb, void *arg)
{
	const struct ps_table *t = arg;
	return strcmp(t->bytes + t->ent[*(const uint32_t *)pa].word, t->bytes + t->ent[*(const uint32_t *)pb].word);
}

int ps_table_flush(struct ps_table *t, FILE *f)
{
	for (uint32_t i = 0; i < t->nent; i++)
		t->order[i] = i;
	/* glibc's qsort_r is a merge sort (msort_with_tmp): the function the paper found bounding
	 * pedsort at 48 cores, by cache capacity. */
	qsort_r(t->order, t->nent, sizeof(*t->order), by_word, t);

	uint32_t pos = 0;
	for (uint32_t k = 0; k < t->nent; k++) {
		struct entry *e = &t->ent[t->order[k]];
		e->cursor = pos;
		pos += e->count;
	}
	for (size_t r = 0; r < t->nlog; r++) {
		const struct logrec *l = &t->log[r];
		t->scatter[t->ent[l->entry].cursor++] = (struct ps_posting){ l->file, l->off };
	}
	for (uint32_t k = 0; k < t->nent; k++) {
		const struct entry *e = &t->ent[t->order[k]];
		const struct ps_posting *p = t->scatter + (e->cursor - e->count);
		fwrite(t->bytes + e->word, 1, e->len + 1, f);
		fwrite(&e->count, sizeof(e->count), 1, f);
		fwrite(p, sizeof(*p), e->count, f);
	}
	int err = ferror(f) ? (errno ? errno : EIO) : 0;

	memset(t->slots, 0, ((size_t)t->mask + 1) * sizeof(*t->slots));
	t->nent = 0;
	t->nbytes = 0;
	t->nlog = 0;
	return err;
}
