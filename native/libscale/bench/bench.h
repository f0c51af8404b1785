/*
 * bench.h - what the libscale benchmarks share. Each benchmark is a micro driver testcase (micro.h)
 * named STRUCTURE/FORM, e.g. counter/stock and counter/scalable, so the driver's pinning, start gate
 * and counters serve them all and the harness reads them like any microbenchmark.
 */
#ifndef SCALE_BENCH_H
#define SCALE_BENCH_H

#include "micro.h"
#include "scale/cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* A task-private xorshift generator, seeded by task number. */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * Busy delays measured in time, not loop iterations: an empty loop's speed changes with its alignment
 * and inlining, which made the same "200 ns" differ twofold between builds. x86 reads the TSC (a few
 * cycles); elsewhere the vDSO clock.
 */
static inline uint64_t bench_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static inline void bench_delay(uint64_t ticks)
{
	uint64_t start = bench_ticks();
	while (bench_ticks() - start < ticks)
		__asm__ __volatile__("" ::: "memory");
}

static inline double bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Ticks per nanosecond, measured once in prepare() against the monotonic clock over 20 ms. */
static inline double bench_ticks_per_ns(void)
{
	double t0 = bench_now_ns();
	uint64_t c0 = bench_ticks();
	while (bench_now_ns() - t0 < 20e6)
		;
	double t1 = bench_now_ns();
	uint64_t c1 = bench_ticks();
	return (double)(c1 - c0) / (t1 - t0);
}

static inline void *bench_alloc(size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, SCALE_LINE, (size + SCALE_LINE - 1) / SCALE_LINE * SCALE_LINE))
		return NULL;
	return p;
}

#endif
