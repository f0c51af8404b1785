/* The histogram against exact answers: bucket edges, percentiles of known distributions, merging. */
#include "../hist.h"
#include "check.h"

#include <stdlib.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static uint64_t exact_percentile(const uint64_t *sorted, size_t n, double fraction)
{
	size_t rank = (size_t)(fraction * (double)n);
	if ((double)rank < fraction * (double)n)
		rank++;
	return sorted[(rank ? rank : 1) - 1];
}

static void check_edges(void)
{
	/* Every value lands in a bucket whose top is at least it and within 1/64 of it. */
	uint64_t probes[] = { 0, 1, 127, 128, 129, 255, 256, 1000, 65535, 65536, 1234567, 1ull << 40,
			      (1ull << 40) + 12345, UINT64_MAX / 3, UINT64_MAX };
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t v = probes[i];
		unsigned idx = hist_index(v);
		CHECK(idx < HIST_BUCKETS, "value %llu index %u", (unsigned long long)v, idx);
		uint64_t top = hist_bucket_top(idx);
		CHECK(top >= v, "value %llu top %llu", (unsigned long long)v, (unsigned long long)top);
		CHECK(top - v <= v / 64, "value %llu top %llu too wide", (unsigned long long)v, (unsigned long long)top);
		if (idx > 0)
			CHECK(hist_bucket_top(idx - 1) < v, "value %llu belongs in an earlier bucket", (unsigned long long)v);
	}
	/* Consecutive buckets tile the range with no gap and no overlap. */
	for (unsigned i = 1; i < HIST_BUCKETS; i++)
		CHECK(hist_index(hist_bucket_top(i - 1) + 1) == i, "gap after bucket %u", i - 1);
}

static void check_distribution(uint64_t (*draw)(void), const char *name)
{
	enum { N = 200000 };
	uint64_t *values = malloc(N * sizeof(*values));
	CHECK(values, "malloc");
	struct hist a, b;
	hist_init(&a);
	hist_init(&b);
	for (size_t i = 0; i < N; i++) {
		values[i] = draw();
		hist_record(i % 2 ? &a : &b, values[i]); /* two "threads", merged below */
	}
	hist_merge(&a, &b);
	qsort(values, N, sizeof(*values), cmp_u64);
	CHECK(a.count == N, "%s: count %llu", name, (unsigned long long)a.count);
	CHECK(a.min == values[0] && a.max == values[N - 1], "%s: min/max", name);
	double fractions[] = { 0.5, 0.9, 0.99, 0.999, 1.0 };
	for (size_t i = 0; i < sizeof(fractions) / sizeof(fractions[0]); i++) {
		uint64_t want = exact_percentile(values, N, fractions[i]);
		uint64_t got = hist_percentile(&a, fractions[i]);
		CHECK(got >= want && got - want <= want / 64, "%s p%g: histogram %llu, exact %llu", name,
		      fractions[i] * 100, (unsigned long long)got, (unsigned long long)want);
	}
	free(values);
}

static uint64_t uniform_small(void)
{
	return (uint64_t)(rand() % 100);
}

/* Latency-like: a body around 50 µs and a long tail to 100 ms, in nanoseconds. */
static uint64_t long_tail(void)
{
	uint64_t base = 40000 + (uint64_t)(rand() % 20000);
	int r = rand() % 1000;
	return r == 0 ? base * 2000 : r < 20 ? base * 20 : base;
}

int main(void)
{
	srand(42);
	check_edges();
	check_distribution(uniform_small, "uniform 0..99");
	check_distribution(long_tail, "long tail");
	struct hist empty;
	hist_init(&empty);
	CHECK(hist_percentile(&empty, 0.99) == 0, "empty histogram");
	puts("test_hist: ok");
	return 0;
}
