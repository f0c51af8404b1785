/* The input generator: text whose word frequencies follow Zipf's law over a large vocabulary. */
#include "metis/gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The word of a rank: 2 to 11 letters, a fixed function of (seed, rank). */
static size_t word_of(uint64_t seed, uint32_t rank, char *out)
{
	uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + rank);
	size_t len = 2 + h % 10;
	for (size_t i = 0; i < len; i++) {
		h = mix(h + i);
		out[i] = (char)('a' + h % 26);
	}
	return len;
}

int metis_generate(FILE *f, uint64_t bytes, uint64_t seed, uint32_t vocab)
{
	if (!vocab)
		return EINVAL;
	double *cdf = malloc((size_t)vocab * sizeof(*cdf));
	if (!cdf)
		return ENOMEM;
	double total = 0;
	for (uint32_t r = 0; r < vocab; r++)
		cdf[r] = (total += 1.0 / (r + 1.0));	/* Zipf with exponent 1: frequency ~ 1 / rank */
	uint64_t rng = mix(seed + 1), written = 0;
	unsigned on_line = 0;
	char word[16];
	while (written < bytes) {
		rng = mix(rng);
		double u = (double)(rng >> 11) / 9007199254740992.0 * total;
		uint32_t lo = 0, hi = vocab - 1;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t len = word_of(seed, lo, word);
		word[len++] = ++on_line % 12 ? ' ' : '\n';
		if (fwrite(word, 1, len, f) != len) {
			free(cdf);
			return errno ? errno : EIO;
		}
		written += len;
	}
	free(cdf);
	return fflush(f) ? errno : 0;
}
