/*
 * The live statistics a load generator shares with the harness: a small file both map. The harness
 * samples the per-thread counters as it does a micro driver's, and writes `phase` to say when its
 * measurement window opens and closes, so latencies and window counts cover exactly the window.
 * Layout read by mosbench/loadgen.py: keep both in step (LOAD_VERSION).
 */
#ifndef MOSBENCH_LOAD_STATS_H
#define MOSBENCH_LOAD_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LOAD_MAGIC "MOSLOAD1"
#define LOAD_VERSION 2
#define LOAD_SLOT_STRIDE 128
#define LOAD_SLOTS_OFFSET 256

enum load_state { LOAD_STARTING, LOAD_RUNNING, LOAD_FAILED, LOAD_STOPPED };
enum load_phase { LOAD_WARMUP, LOAD_WINDOW, LOAD_AFTER };

/* Per thread, cumulative since start. `done` is the work: requests answered correctly. */
enum load_counter {
	LC_SENT,	/* requests sent */
	LC_DONE,	/* answered as expected, in time */
	LC_LOST,	/* no answer before the time-out (UDP) or connection failed (TCP) */
	LC_ERRORS,	/* answered with something else: an error or a wrong reply */
	LC_LATE,	/* answered after their time-out: not counted as done */
	LC_BYTES,	/* payload bytes of the answers counted as done (response bodies, values) */
	LC_DUE,		/* open loop (--rate): requests whose intended send time has come */
	LC_COUNT
};

struct load_header {
	char magic[8];
	uint32_t version;
	uint32_t nthreads;
	uint32_t slot_stride;
	uint32_t slots_offset;
	uint32_t ncounters;
	_Atomic uint32_t state;
	_Atomic uint32_t phase;	/* written by the harness */
	_Atomic uint32_t fail_claimed;
	char fail_what[216];
};

_Static_assert(sizeof(struct load_header) <= LOAD_SLOTS_OFFSET, "header overlaps the slots");
_Static_assert(LC_COUNT * sizeof(uint64_t) <= LOAD_SLOT_STRIDE, "counters overflow their slot");

struct load_stats {
	struct load_header *hdr;
	size_t size;
};

/* Made under a temporary name and renamed once written; with path NULL, in anonymous memory. */
int load_stats_create(struct load_stats *s, const char *path, unsigned nthreads);
_Atomic uint64_t *load_counter(const struct load_stats *s, unsigned thread, enum load_counter c);
void load_add(const struct load_stats *s, unsigned thread, enum load_counter c, uint64_t n);
/* First failure wins; the state becomes LOAD_FAILED. */
void load_fail(const struct load_stats *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
