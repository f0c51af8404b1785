/* corpus.c - the work queue: every regular file under a root, largest first (the paper's order, so no
 * worker is left with a big file at the end). Symbolic links are not followed: a tree indexes once. */
#include "psearchy/psearchy.h"

#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	char *path;
	uint64_t size;
};

static int by_size_then_path(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return strcmp(a->path, b->path);
}

static void free_entries(struct entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

static int fail(char *err, struct entry *v, size_t n, const char *fmt, const char *path, int e)
{
	snprintf(err, PS_ERR_LEN, fmt, path, strerror(e));
	free_entries(v, n);
	return -1;
}

int ps_corpus_load(const char *root, struct ps_corpus *c, char *err)
{
	char *const roots[] = { (char *)root, NULL };
	size_t n = 0, cap = 1024, skip = strlen(root);
	struct entry *v = malloc(cap * sizeof(*v));
	memset(c, 0, sizeof(*c));
	if (!v)
		return fail(err, NULL, 0, "%s: %s", root, ENOMEM);
	while (skip > 1 && root[skip - 1] == '/')
		skip--;

	FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	if (!fts)
		return fail(err, v, n, "%s: %s", root, errno);
	for (FTSENT *e; (e = fts_read(fts));) {
		if (e->fts_info == FTS_DNR || e->fts_info == FTS_ERR || e->fts_info == FTS_NS) {
			fail(err, v, n, "%s: %s", e->fts_path, e->fts_errno);
			fts_close(fts);	/* after the message: it frees fts_path */
			return -1;
		}
		if (e->fts_level == 0 && e->fts_info != FTS_D)
			break;	/* the root is not a directory: reported below */
		if (e->fts_info != FTS_F)
			continue;
		/* Found now rather than by a worker half-way through the job. */
		if (access(e->fts_path, R_OK)) {
			fail(err, v, n, "cannot read %s: %s", e->fts_path, errno);
			fts_close(fts);
			return -1;
		}
		if ((uint64_t)e->fts_statp->st_size > UINT32_MAX) {
			fail(err, v, n, "%s: %s (positions are 32-bit offsets)", e->fts_path, EFBIG);
			fts_close(fts);
			return -1;
		}
		if (n == cap) {
			struct entry *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				fts_close(fts);
				return fail(err, v, n, "%s: %s", root, ENOMEM);
			}
			v = nv;
		}
		v[n].size = (uint64_t)e->fts_statp->st_size;
		v[n].path = strdup(e->fts_path + skip + 1);
		if (!v[n++].path) {
			fts_close(fts);
			return fail(err, v, n - 1, "%s: %s", root, ENOMEM);
		}
	}
	int walk_err = errno;
	fts_close(fts);

	struct stat st;
	if (stat(root, &st))
		return fail(err, v, n, "%s: %s", root, errno);
	if (!S_ISDIR(st.st_mode))
		return fail(err, v, n, "%s: %s", root, ENOTDIR);
	if (walk_err && !n)
		return fail(err, v, n, "%s: %s", root, walk_err);

	qsort(v, n, sizeof(*v), by_size_then_path);
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += v[i].size;
	if (!bytes) {
		snprintf(err, PS_ERR_LEN, "%s: no text to index (%zu files, all empty)", root, n);
		free_entries(v, n);
		return -1;
	}
	if (n > UINT32_MAX)
		return fail(err, v, n, "%s: %s (more than 2^32 files)", root, EOVERFLOW);

	c->root = realpath(root, NULL);	/* the index names files wherever it is queried from */
	c->paths = malloc(n * sizeof(*c->paths));
	c->sizes = malloc(n * sizeof(*c->sizes));
	if (!c->root || !c->paths || !c->sizes) {
		ps_corpus_free(c);
		return fail(err, v, n, "%s: %s", root, ENOMEM);
	}
	for (size_t i = 0; i < n; i++) {
		c->paths[i] = v[i].path;
		c->sizes[i] = v[i].size;
	}
	c->n = n;
	c->bytes = bytes;
	free(v);
	return 0;
}

void ps_corpus_free(struct ps_corpus *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->sizes);
	free(c->root);
	memset(c, 0, sizeof(*c));
}
