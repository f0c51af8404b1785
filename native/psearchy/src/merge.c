/*
 * merge.c - phase 2: a k-way merge of one worker's sorted runs. A heap ordered by (word, run) pops a
 * word's runs in run order, and runs are numbered in the order their files were taken from the queue,
 * so concatenating their postings keeps each word's positions ascending. The final merge records
 * every word's offset in a sequence of Berkeley DBs.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct run {
	FILE *f;
	unsigned idx;
	unsigned len;
	uint32_t count;
	char word[PS_MAX_WORD + 1];
};

/* Reads the next record's word and count: 1 read, 0 at the end of the run, -1 on a bad run. */
static int run_next(struct run *r)
{
	int c;
	unsigned len = 0;
	while ((c = getc_unlocked(r->f)) > 0) {
		if (len == PS_MAX_WORD)
			return -1;
		r->word[len++] = (char)c;
	}
	if (c == EOF && len == 0)
		return ferror(r->f) ? -1 : 0;
	if (c == EOF || len == 0)
		return -1;
	r->word[len] = '\0';
	r->len = len;
	if (fread(&r->count, sizeof(r->count), 1, r->f) != 1 || r->count == 0)
		return -1;
	return 1;
}

static inline int run_less(const struct run *a, const struct run *b)
{
	int c = strcmp(a->word, b->word);
	return c < 0 || (c == 0 && a->idx < b->idx);
}

static void sift_down(struct run **h, unsigned n, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, m = i;
		if (l < n && run_less(h[l], h[m]))
			m = l;
		if (l + 1 < n && run_less(h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct run *t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void sift_up(struct run **h, unsigned i)
{
	while (i > 0 && run_less(h[i], h[(i - 1) / 2])) {
		struct run *t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static int io_error(char *err, const char *what, const char *name, FILE *f)
{
	snprintf(err, PS_ERR_LEN, "%s %s: %s", what, name, f && ferror(f) && errno ? strerror(errno)
										 : "unexpected end of file");
	return -1;
}

int ps_merge(FILE **in, const char *const *names, unsigned n, FILE *out, const char *out_name, uint64_t offset,
	     struct ps_dbs *dbs, int (*stop)(void *), void *stop_arg, struct ps_merge_stats *ms, char *err)
{
	struct run *runs = calloc(n ? n : 1, sizeof(*runs));
	struct run **heap = calloc(n ? n : 1, sizeof(*heap));
	struct run **group = calloc(n ? n : 1, sizeof(*group));
	char copybuf[1 << 16];
	unsigned nh = 0;
	int rc = -1;
	memset(ms, 0, sizeof(*ms));
	if (!runs || !heap || !group) {
		snprintf(err, PS_ERR_LEN, "merging into %s: %s", out_name, strerror(ENOMEM));
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		runs[i] = (struct run){ .f = in[i], .idx = i };
		int got = run_next(&runs[i]);
		if (got < 0) {
			io_error(err, "reading", names[i], in[i]);
			goto out;
		}
		if (got) {
			heap[nh] = &runs[i];
			sift_up(heap, nh++);
		}
	}
	while (nh) {
		if (stop(stop_arg)) {
			snprintf(err, PS_ERR_LEN, "stopped");
			goto out;
		}
		/* Pop every run holding the smallest word; they come out in run order. */
		unsigned ng = 0;
		uint64_t total = 0;
		do {
			group[ng++] = heap[0];
			total += heap[0]->count;
			heap[0] = heap[--nh];
			sift_down(heap, nh, 0);
		} while (nh && !strcmp(heap[0]->word, group[0]->word));
		if (total > UINT32_MAX) {
			snprintf(err, PS_ERR_LEN, "merging into %s: word '%s' occurs more than 2^32 times", out_name,
				 group[0]->word);
			goto out;
		}
		const struct run *w = group[0];
		uint32_t count = (uint32_t)total;
		if (dbs && ps_dbs_put(dbs, w->word, w->len, offset, err))
			goto out;
		fwrite(w->word, 1, w->len + 1, out);
		fwrite(&count, sizeof(count), 1, out);
		for (unsigned g = 0; g < ng; g++) {
			struct run *r = group[g];
			for (uint64_t left = (uint64_t)r->count * sizeof(struct ps_posting); left;) {
				size_t chunk = left < sizeof(copybuf) ? (size_t)left : sizeof(copybuf);
				if (fread(copybuf, 1, chunk, r->f) != chunk) {
					io_error(err, "reading", names[r->idx], r->f);
					goto out;
				}
				fwrite(copybuf, 1, chunk, out);
				left -= chunk;
			}
		}
		if (ferror(out)) {
			io_error(err, "writing", out_name, out);
			goto out;
		}
		offset += ps_record_bytes(w->len, count);
		ms->words++;
		ms->bytes += ps_record_bytes(w->len, count);
		for (unsigned g = 0; g < ng; g++) {
			struct run *r = group[g];
			int got = run_next(r);
			if (got < 0) {
				io_error(err, "reading", names[r->idx], r->f);
				goto out;
			}
			if (got) {
				heap[nh] = r;
				sift_up(heap, nh++);
			}
		}
	}
	rc = 0;
out:
	free(group);
	free(heap);
	free(runs);
	return rc;
}

int ps_db_open(DB **db, const char *path, int create)
{
	int e = db_create(db, NULL, 0);
	if (e) {
		*db = NULL;
		return e;
	}
	/* Berkeley DB prints its own diagnostics unless told not to; the caller reports the code once. */
	(*db)->set_errfile(*db, NULL);
	(*db)->set_errcall(*db, NULL);
	e = (*db)->open(*db, NULL, path, NULL, DB_BTREE, create ? DB_CREATE | DB_EXCL : DB_RDONLY, 0644);
	if (e) {
		(*db)->close(*db, 0);
		*db = NULL;
	}
	return e;
}

static int db_error(char *err, const char *what, const struct ps_dbs *s, unsigned i, int e)
{
	snprintf(err, PS_ERR_LEN, "%s %s/words-%u.db: %s", what, s->dir, i, db_strerror(e));
	return -1;
}

int ps_dbs_put(struct ps_dbs *s, const char *word, unsigned len, uint64_t offset, char *err)
{
	if (!s->db) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/words-%u.db", s->dir, s->ndbs);
		int e = ps_db_open(&s->db, path, 1);
		if (e)
			return db_error(err, "creating", s, s->ndbs, e);
		s->ndbs++;
		s->count = 0;
	}
	DBT key = { .data = (void *)word, .size = len }, val = { .data = &offset, .size = sizeof(offset) };
	int e = s->db->put(s->db, NULL, &key, &val, 0);
	if (e)
		return db_error(err, "writing", s, s->ndbs - 1, e);
	s->entries++;
	if (++s->count == s->dblim)
		return ps_dbs_close(s, err);
	return 0;
}

int ps_dbs_close(struct ps_dbs *s, char *err)
{
	if (!s->db)
		return 0;
	int e = s->db->close(s->db, 0);
	s->db = NULL;
	return e ? db_error(err, "writing", s, s->ndbs - 1, e) : 0;
}
