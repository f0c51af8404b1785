#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned hist_index(uint64_t value)
{
	if (value < HIST_SUB)
		return (unsigned)value;
	/* shift keeps the top HIST_SUB_BITS bits: value >> shift lies in [HIST_HALF, HIST_SUB). */
	unsigned shift = (unsigned)(63 - __builtin_clzll(value)) - (HIST_SUB_BITS - 1);
	return HIST_SUB + (shift - 1) * HIST_HALF + (unsigned)((value >> shift) - HIST_HALF);
}

uint64_t hist_bucket_top(unsigned index)
{
	if (index < HIST_SUB)
		return index;
	unsigned shift = (index - HIST_SUB) / HIST_HALF + 1;
	uint64_t mantissa = (index - HIST_SUB) % HIST_HALF + HIST_HALF;
	uint64_t low = mantissa << shift;
	return low + ((1ull << shift) - 1);
}

void hist_record(struct hist *h, uint64_t value)
{
	h->buckets[hist_index(value)]++;
	h->count++;
	if (value < h->min)
		h->min = value;
	if (value > h->max)
		h->max = value;
}

void hist_merge(struct hist *into, const struct hist *from)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->buckets[i] += from->buckets[i];
	into->count += from->count;
	if (from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t hist_percentile(const struct hist *h, double fraction)
{
	if (!h->count)
		return 0;
	if (fraction <= 0)
		return h->min;
	/* The rank of the value wanted, counted from 1: ceil(fraction * count). */
	uint64_t rank = (uint64_t)(fraction * (double)h->count);
	if ((double)rank < fraction * (double)h->count)
		rank++;
	if (rank > h->count)
		rank = h->count;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t top = hist_bucket_top(i);
			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}
