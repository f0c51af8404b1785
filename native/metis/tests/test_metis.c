/*
 * Metis against a single-threaded reference written independently (collect every (word, position),
 * sort, group): the text output must be identical for both applications, both page sizes, several
 * seeds, sizes, worker counts and chunk sizes down to a few bytes (so words are cut at chunk edges
 * all the time). Edge cases: empty input, input without words, one word longer than a chunk.
 */
#include "metis/gen.h"
#include "metis/metis.h"
#include "metis/output.h"

#include "check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct occurrence {
	const char *word;
	uint32_t len;
	uint64_t pos;
};

static int cmp_occurrence(const void *a, const void *b)
{
	const struct occurrence *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->word, y->word, n);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The reference: every occurrence, sorted, grouped. Returns malloc'd text. */
static char *reference(const char *in, size_t len, bool positions, size_t *out_len)
{
	size_t cap = 1024, n = 0;
	struct occurrence *occ = malloc(cap * sizeof(*occ));
	for (size_t i = 0; i < len;) {
		while (i < len && !metis_word_char((unsigned char)in[i]))
			i++;
		size_t s = i;
		while (i < len && metis_word_char((unsigned char)in[i]))
			i++;
		if (i > s) {
			if (n == cap)
				occ = realloc(occ, (cap *= 2) * sizeof(*occ));
			occ[n++] = (struct occurrence){ in + s, (uint32_t)(i - s), s };
		}
	}
	qsort(occ, n, sizeof(*occ), cmp_occurrence);
	char *text;
	FILE *f = open_memstream(&text, out_len);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		fwrite(occ[i].word, 1, occ[i].len, f);
		while (j < n && occ[j].len == occ[i].len && !memcmp(occ[j].word, occ[i].word, occ[i].len))
			j++;
		if (positions)
			for (size_t k = i; k < j; k++)
				fprintf(f, " %" PRIu64, occ[k].pos);
		else
			fprintf(f, " %zu", j - i);
		fputc('\n', f);
		i = j;
	}
	fclose(f);
	free(occ);
	return text;
}

static char *run_metis(const char *in, size_t len, const struct metis_app *app, unsigned workers,
		       enum metis_pages pages, size_t chunk, unsigned partitions, size_t *out_len)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int cpus[16];
	for (unsigned i = 0; i < workers; i++)
		cpus[i] = (int)(i % (unsigned)(online > 0 ? online : 1));	/* more workers than CPUs is fine */
	struct metis_job job = { .app = app, .input = in, .input_len = len, .cpus = cpus, .ncpus = workers,
				 .pages = pages, .chunk = chunk, .partitions = partitions };
	struct metis_result r;
	struct metis_state *st = NULL;
	CHECK(metis_run(&job, &r, &st) == 0, "metis_run");
	char *text;
	FILE *f = open_memstream(&text, out_len);
	CHECK(metis_write_result(f, &r) == 0, "write");
	fclose(f);
	metis_free(st);
	return text;
}

static void compare(const char *label, const char *in, size_t len, unsigned workers, enum metis_pages pages,
		    size_t chunk, unsigned partitions)
{
	for (int ii = 0; ii < 2; ii++) {
		size_t rlen, mlen;
		char *want = reference(in, len, ii, &rlen);
		char *got = run_metis(in, len, ii ? &metis_invindex : &metis_wordcount, workers, pages, chunk,
				      partitions, &mlen);
		size_t at = 0;
		while (at < rlen && at < mlen && want[at] == got[at])
			at++;
		CHECK(rlen == mlen && at == rlen, "%s %s, %u workers, %s pages, chunk %zu: output differs at byte %zu "
		      "(%zu vs %zu bytes)", label, ii ? "invindex" : "wordcount", workers,
		      pages == METIS_PAGES_4K ? "4k" : "2m", chunk, at, mlen, rlen);
		free(want);
		free(got);
	}
}

static char *generated(uint64_t bytes, uint64_t seed, uint32_t vocab, size_t *len)
{
	char *text;
	FILE *f = open_memstream(&text, len);
	CHECK(metis_generate(f, bytes, seed, vocab) == 0, "generate");
	fclose(f);
	return text;
}

int main(void)
{
	int cases = 0;
	const uint64_t seeds[] = { 1, 7, 42 };
	const uint64_t sizes[] = { 1000, 200000, 3000000 };
	for (unsigned s = 0; s < 3; s++) {
		size_t len;
		char *in = generated(sizes[s], seeds[s], s == 2 ? 100000 : 500, &len);
		for (unsigned workers = 1; workers <= 4; workers++) {
			compare("generated", in, len, workers, METIS_PAGES_4K, s == 0 ? 7 : 4096, 0);
			compare("generated", in, len, workers, METIS_PAGES_2M, 65536, workers == 3 ? 1 : 0);
			cases += 4;
		}
		free(in);
	}
	const char *odd[] = { "", "  ,,, ... \n\n", "x", "one", "a b a b a", "__init__ main.c main_c MAIN" };
	for (unsigned i = 0; i < sizeof(odd) / sizeof(*odd); i++)
		for (unsigned workers = 1; workers <= 3; workers++, cases += 2)
			compare("edge case", odd[i], strlen(odd[i]), workers, METIS_PAGES_4K, 2, 0);
	char long_word[10000];
	memset(long_word, 'w', sizeof(long_word) - 1);
	long_word[sizeof(long_word) - 1] = 0;
	compare("a word longer than a chunk", long_word, strlen(long_word), 3, METIS_PAGES_4K, 64, 0);
	cases += 2;
	printf("metis: %d passed, 0 failed (identical to the single-threaded reference)\n", cases);
	return 0;
}
