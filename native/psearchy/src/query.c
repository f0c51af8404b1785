/* query.c - "where does WORD occur": each worker's DBs cover consecutive ranges of its sorted words, so
 * at most one DB per worker holds the word; its record in that worker's postings file lists the places. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ps_index {
	char *root;
	unsigned nworkers;
	unsigned *ndbs;
	DB ***dbs;
	int *postings;
	DB *files;
};

static int fail(char *err, const char *fmt, const char *a, const char *b)
{
	snprintf(err, PS_ERR_LEN, fmt, a, b);
	return -1;
}

static int read_manifest(const char *dir, struct ps_index *ix, char *err)
{
	char path[PATH_MAX], line[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/manifest", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return fail(err, "%s is not a psearchy index: %s", dir, strerror(errno));
	int ok = fgets(line, sizeof(line), f) && !strcmp(line, "mosbench-psearchy index 1\n") &&
		 fgets(line, sizeof(line), f) && !strncmp(line, "corpus ", 7);
	if (ok) {
		line[strcspn(line, "\n")] = '\0';
		ok = (ix->root = strdup(line + 7)) != NULL;
	}
	size_t nfiles;
	ok = ok && fgets(line, sizeof(line), f) && sscanf(line, "files %zu", &nfiles) == 1 &&
	     fgets(line, sizeof(line), f) && sscanf(line, "workers %u", &ix->nworkers) == 1 && ix->nworkers > 0;
	if (ok) {
		ix->ndbs = calloc(ix->nworkers, sizeof(*ix->ndbs));
		ix->dbs = calloc(ix->nworkers, sizeof(*ix->dbs));
		ix->postings = malloc(ix->nworkers * sizeof(*ix->postings));
		ok = ix->ndbs && ix->dbs && ix->postings;
		for (unsigned k = 0; ok && k < ix->nworkers; k++)
			ix->postings[k] = -1;
	}
	for (unsigned k = 0; ok && k < ix->nworkers; k++) {
		unsigned id;
		ok = fgets(line, sizeof(line), f) && sscanf(line, "worker %u dbs %u", &id, &ix->ndbs[k]) == 2 && id == k;
	}
	fclose(f);
	return ok ? 0 : fail(err, "%s: %s", path, "not a psearchy manifest");
}

int ps_open(const char *dir, struct ps_index **out, char *err)
{
	char path[PATH_MAX];
	struct ps_index *ix = calloc(1, sizeof(*ix));
	*out = NULL;
	if (!ix)
		return fail(err, "%s: %s", dir, strerror(ENOMEM));
	if (read_manifest(dir, ix, err))
		goto bad;
	snprintf(path, sizeof(path), "%s/files.db", dir);
	int e = ps_db_open(&ix->files, path, 0);
	if (e) {
		fail(err, "%s: %s", path, db_strerror(e));
		goto bad;
	}
	for (unsigned k = 0; k < ix->nworkers; k++) {
		char magic[PS_POSTINGS_HEADER];
		snprintf(path, sizeof(path), "%s/w%u/postings", dir, k);
		ix->postings[k] = open(path, O_RDONLY | O_CLOEXEC);
		if (ix->postings[k] < 0) {
			fail(err, "%s: %s", path, strerror(errno));
			goto bad;
		}
		if (pread(ix->postings[k], magic, sizeof(magic), 0) != sizeof(magic) ||
		    memcmp(magic, PS_POSTINGS_MAGIC, sizeof(magic))) {
			fail(err, "%s: %s", path, "not a psearchy postings file");
			goto bad;
		}
		if (!(ix->dbs[k] = calloc(ix->ndbs[k] ? ix->ndbs[k] : 1, sizeof(DB *)))) {
			fail(err, "%s: %s", dir, strerror(ENOMEM));
			goto bad;
		}
		for (unsigned s = 0; s < ix->ndbs[k]; s++) {
			snprintf(path, sizeof(path), "%s/w%u/words-%u.db", dir, k, s);
			if ((e = ps_db_open(&ix->dbs[k][s], path, 0))) {
				fail(err, "%s: %s", path, db_strerror(e));
				goto bad;
			}
		}
	}
	*out = ix;
	return 0;
bad:
	ps_close(ix);
	return -1;
}

void ps_close(struct ps_index *ix)
{
	if (!ix)
		return;
	for (unsigned k = 0; k < ix->nworkers; k++) {
		for (unsigned s = 0; ix->dbs && ix->dbs[k] && s < ix->ndbs[k]; s++)
			if (ix->dbs[k][s])
				ix->dbs[k][s]->close(ix->dbs[k][s], 0);
		if (ix->dbs)
			free(ix->dbs[k]);
		if (ix->postings && ix->postings[k] >= 0)
			close(ix->postings[k]);
	}
	if (ix->files)
		ix->files->close(ix->files, 0);
	free(ix->dbs);
	free(ix->ndbs);
	free(ix->postings);
	free(ix->root);
	free(ix);
}

struct postings {
	struct ps_posting *v;
	size_t n, cap;
};

/* Appends worker k's record for word, if one of its DBs has it. */
static int worker_postings(struct ps_index *ix, unsigned k, const char *word, unsigned len, struct postings *p,
			   char *err)
{
	uint64_t offset;
	int found = 0;
	for (unsigned s = 0; s < ix->ndbs[k] && !found; s++) {
		DBT key = { .data = (void *)word, .size = len }, val = { 0 };
		int e = ix->dbs[k][s]->get(ix->dbs[k][s], NULL, &key, &val, 0);
		if (e == DB_NOTFOUND)
			continue;
		if (e || val.size != sizeof(offset))
			return fail(err, "looking up '%s': %s", word, e ? db_strerror(e) : "bad DB entry");
		memcpy(&offset, val.data, sizeof(offset));
		found = 1;
	}
	if (!found)
		return 0;
	char head[PS_MAX_WORD + 1 + sizeof(uint32_t)];
	uint32_t count;
	if (pread(ix->postings[k], head, len + 1 + sizeof(count), (off_t)offset) != (ssize_t)(len + 1 + sizeof(count)) ||
	    memcmp(head, word, len + 1))
		return fail(err, "looking up '%s': %s", word, "the postings file does not match its DB");
	memcpy(&count, head + len + 1, sizeof(count));
	if (p->n + count > p->cap) {
		size_t cap = (p->n + count) * 2;
		struct ps_posting *v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return fail(err, "looking up '%s': %s", word, strerror(ENOMEM));
		p->v = v;
		p->cap = cap;
	}
	size_t bytes = (size_t)count * sizeof(struct ps_posting);
	if (pread(ix->postings[k], p->v + p->n, bytes, (off_t)(offset + len + 1 + sizeof(count))) != (ssize_t)bytes)
		return fail(err, "looking up '%s': %s", word, "the postings file is truncated");
	p->n += count;
	return 0;
}

static int by_file(const void *pa, const void *pb)
{
	const struct ps_posting *a = pa, *b = pb;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return (a->off > b->off) - (a->off < b->off);
}

static int by_path(const void *pa, const void *pb)
{
	const struct ps_hit *a = pa, *b = pb;
	int c = a->path == b->path ? 0 : strcmp(a->path, b->path);
	return c ? c : (a->off > b->off) - (a->off < b->off);
}

static char *file_path(struct ps_index *ix, uint32_t id, char *err)
{
	DBT key = { .data = &id, .size = sizeof(id) }, val = { 0 };
	int e = ix->files->get(ix->files, NULL, &key, &val, 0);
	if (e) {
		snprintf(err, PS_ERR_LEN, "file id %" PRIu32 ": %s", id, db_strerror(e));
		return NULL;
	}
	size_t rl = strlen(ix->root);
	char *p = malloc(rl + 1 + val.size + 1);
	if (!p) {
		fail(err, "%s: %s", "path", strerror(ENOMEM));
		return NULL;
	}
	memcpy(p, ix->root, rl);
	p[rl] = '/';
	memcpy(p + rl + 1, val.data, val.size);
	p[rl + 1 + val.size] = '\0';
	return p;
}

void ps_hits_free(struct ps_hit *hits, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (i == 0 || hits[i].path != hits[i - 1].path)
			free((char *)hits[i].path);
	free(hits);
}

int ps_lookup(struct ps_index *ix, const char *query, struct ps_hit **hits, size_t *n, char *err)
{
	char word[PS_MAX_WORD + 1];
	size_t len = strlen(query);
	*hits = NULL;
	*n = 0;
	if (len == 0 || len > PS_MAX_WORD)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!(word[i] = (char)ps_wordchar[(unsigned char)query[i]]))
			return 0;	/* not a word: indexed nowhere */
	word[len] = '\0';

	struct postings p = { 0 };
	for (unsigned k = 0; k < ix->nworkers; k++)
		if (worker_postings(ix, k, word, (unsigned)len, &p, err)) {
			free(p.v);
			return -1;
		}
	if (!p.n)
		return 0;
	qsort(p.v, p.n, sizeof(*p.v), by_file);
	struct ps_hit *h = malloc(p.n * sizeof(*h));
	if (!h) {
		free(p.v);
		return fail(err, "looking up '%s': %s", word, strerror(ENOMEM));
	}
	for (size_t i = 0; i < p.n; i++) {
		h[i].off = p.v[i].off;
		h[i].path = i && p.v[i].file == p.v[i - 1].file ? h[i - 1].path : file_path(ix, p.v[i].file, err);
		if (!h[i].path) {
			ps_hits_free(h, i);
			free(p.v);
			return -1;
		}
	}
	free(p.v);
	qsort(h, p.n, sizeof(*h), by_path);
	*hits = h;
	*n = p.n;
	return 0;
}
