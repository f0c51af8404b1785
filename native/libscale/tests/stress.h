/*
 * stress.h - the one driver every libscale stress test shares: more threads than CPUs (so threads meet
 * on a CPU slot), a start gate, a time bound, forced migrations, and CHECK for invariants.
 *
 * STRESS_SECONDS sets each phase's length (default 0.5 s; sanitizer builds are slower, not longer).
 */
#ifndef SCALE_STRESS_H
#define SCALE_STRESS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

struct stress;

struct stress_worker {
	struct stress *run;
	unsigned id;
	uint64_t rng;
	unsigned next_cpu;
	void *arg;
};

struct stress {
	unsigned nthreads;
	double seconds;
	atomic_bool stop;
	_Atomic unsigned ready;
	void (*body)(struct stress_worker *w);
	void *arg;
};

static inline unsigned stress_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* Twice the CPUs and at least four: slots are shared and threads are preempted mid-operation. */
static inline unsigned stress_threads(void)
{
	unsigned n = 2 * stress_cpus() + 2;
	return n < 4 ? 4 : n > 64 ? 64 : n;
}

static inline double stress_seconds(void)
{
	const char *s = getenv("STRESS_SECONDS");
	double v = s ? atof(s) : 0.5;
	return v > 0 ? v : 0.5;
}

static inline bool stress_running(struct stress_worker *w)
{
	return !atomic_load_explicit(&w->run->stop, memory_order_relaxed);
}

/* xorshift64*: a per-thread generator, no shared state. */
static inline uint64_t stress_rand(struct stress_worker *w)
{
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545f4914f6cdd1dull;
}

/* Moves the calling thread to the next CPU: the migration a per-core structure must survive. */
static inline void stress_migrate(struct stress_worker *w)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->next_cpu++ % stress_cpus(), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *stress_thread(void *p)
{
	struct stress_worker *w = p;
	atomic_fetch_add(&w->run->ready, 1);
	while (atomic_load(&w->run->ready) < w->run->nthreads)
		sched_yield();
	w->run->body(w);
	return NULL;
}

/* Runs body on nthreads threads for the given seconds; returns when all have finished. */
static inline void stress_run(unsigned nthreads, double seconds, void (*body)(struct stress_worker *w),
			      void *arg, struct stress_worker *workers)
{
	struct stress run = { .nthreads = nthreads, .seconds = seconds, .body = body, .arg = arg };
	pthread_t *th = calloc(nthreads, sizeof(*th));
	CHECK(th != NULL, "out of memory");
	atomic_init(&run.stop, false);
	atomic_init(&run.ready, 0);
	for (unsigned i = 0; i < nthreads; i++) {
		workers[i].run = &run;
		workers[i].id = i;
		if (!workers[i].rng)
			workers[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
		workers[i].next_cpu = i;
		workers[i].arg = arg;
		CHECK(pthread_create(&th[i], NULL, stress_thread, &workers[i]) == 0, "pthread_create");
	}
	struct timespec ts = { .tv_sec = (time_t)seconds,
			       .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&run.stop, true);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	free(th);
}

#define STRESS_PASS(name) printf("PASS %s (%u threads on %u CPUs)\n", name, stress_threads(), stress_cpus())

#endif
