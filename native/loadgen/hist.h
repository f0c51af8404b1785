/*
 * A log-linear latency histogram in the manner of HdrHistogram: values below 2^HIST_SUB_BITS are
 * exact, larger ones fall in buckets whose width is 1/2^(HIST_SUB_BITS-1) of their magnitude, so
 * every percentile is within 1/64 (1.6%) of the true value at any scale from nanoseconds to hours,
 * in a fixed 30 KB. One per thread, merged at the end: recording is a shift and an increment.
 */
#ifndef MOSBENCH_HIST_H
#define MOSBENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_HALF (HIST_SUB / 2)
/* Values up to 2^63: one half-range of buckets per power of two above the exact range. */
#define HIST_BUCKETS (HIST_SUB + (64 - HIST_SUB_BITS) * HIST_HALF)

struct hist {
	uint64_t count;
	uint64_t min;
	uint64_t max;
	uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t value);
void hist_merge(struct hist *into, const struct hist *from);
/* The smallest recorded value's bucket top at or below which `fraction` (0..1) of values lie; 0 if empty. */
uint64_t hist_percentile(const struct hist *h, double fraction);

/* Bucket index of a value and the largest value a bucket holds (exposed for the tests). */
unsigned hist_index(uint64_t value);
uint64_t hist_bucket_top(unsigned index);

#endif
