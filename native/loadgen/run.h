/*
 * What every load generator shares: a thread per CPU, pinned; the live statistics file; the phase
 * (warm-up, window, after) set by the harness or, standalone, by the clock; a stop on SIGTERM, SIGINT
 * or the time limit; and at the end one result file with the window's counts and latency percentiles.
 * A generator supplies its thread function, which loops until load_stopping() and counts through
 * load_count() and load_latency().
 */
#ifndef MOSBENCH_LOAD_RUN_H
#define MOSBENCH_LOAD_RUN_H

#include "hist.h"
#include "stats.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

struct load_run;

struct load_thread {
	unsigned id;
	int cpu;
	struct load_run *run;
	bool in_window;
	uint64_t window[LC_COUNT];	/* counts while the window was open */
	struct hist latency;		/* ns, window only */
	int epfd;			/* its epoll set, from load_share_items (else -1) */
	void **items;			/* its share of the generator's items (sockets, sessions) */
	unsigned nitems;
	void *priv;			/* the generator's own per-thread state, if it has any */
};

struct load_run {
	const char *name;		/* for messages: "mosbench-memload" */
	int *cpus;
	unsigned nthreads;
	uint16_t *ports;		/* the servers' ports, on host */
	unsigned nports;
	struct in_addr host;
	const char *host_name;
	const char *stats_path;		/* harness mode; NULL: standalone */
	const char *result_path;
	double limit_s;			/* stops by itself after this long, whatever happens */
	double warmup_s, duration_s;	/* standalone: the window the generator times itself */
	struct load_stats stats;
	struct load_thread *threads;
	void *(*thread_fn)(struct load_thread *t);
	/* Lines of the generator's own for the result file: "key": value pairs, comma-separated. */
	void (*describe)(struct load_run *r, FILE *out);
	void *priv;
};

uint64_t load_now_ns(void);
bool load_stopping(const struct load_run *r);
/* Re-reads the phase: call once per loop iteration. */
void load_poll_phase(struct load_thread *t);
void load_count(struct load_thread *t, enum load_counter c, uint64_t n);
void load_latency(struct load_thread *t, uint64_t ns);
/* Gives every thread an epoll set and its share of the generator's n items, each `size` bytes from
 * `items`: item i goes to thread i mod threads, so every thread gets an even share. 0, or 1 after a
 * message; load_run_free releases them. */
int load_share_items(struct load_run *r, void *items, size_t size, unsigned n);
/* A non-blocking TCP_NODELAY socket connecting to the servers' host at port, added to the thread's
 * epoll set for EPOLLOUT with item as its data; -1 after load_fail. */
int load_tcp_connect(struct load_thread *t, uint16_t port, void *item);
/* Changes the events the thread's epoll set waits for on fd (added by load_tcp_connect). */
void load_watch(struct load_thread *t, int fd, void *item, uint32_t events);
/* A generator thread's loop, until the run stops or a callback fails (returning non-zero, after
 * load_fail): each event of its epoll set to on_event with its data.ptr, and every 10 ms scan(now)
 * for time-outs. */
void load_epoll_loop(struct load_thread *t, int (*on_event)(struct load_thread *t, void *item, uint32_t events),
		     int (*scan)(struct load_thread *t, uint64_t now));
/* `"key": {count, min, p50, p90, p99, p999, max}` of a histogram, for a result file. */
void load_write_latency(FILE *f, const char *key, const struct hist *h);
/* Raises the soft descriptor limit to what `need` descriptors require; a clear error when it cannot. */
int load_reserve_fds(const char *name, unsigned long need);
/* A whole number in [lo, hi] for --what, or a message and exit 2. */
long load_parse_number(const char *name, const char *what, const char *arg, long lo, long hi);
/* Parses --ports/--host/--cpus/--stats/--result/--limit/--warmup/--duration into r; 1 if it took the
 * option, exit 2 with a message for a bad value. */
int load_run_option(struct load_run *r, int opt, const char *arg);
/* After the options: checks the common ones and makes r->threads (id, CPU, histogram) with priv[i]
 * of priv_size bytes each as their generator state (priv may be NULL); 0, or an exit status. */
int load_run_prepare(struct load_run *r, void *priv, size_t priv_size);
/* Starts the threads, waits for the end, writes the result; the program's exit status. */
int load_run_main(struct load_run *r);
/* Frees what load_run_option and the generator allocated in r (threads, CPU list, statistics). */
void load_run_free(struct load_run *r);

#define LOAD_RUN_LONG_OPTIONS                                        \
	{ "ports", required_argument, NULL, 1007 },                 \
	{ "host", required_argument, NULL, 1008 },                  \
	{ "cpus", required_argument, NULL, 1001 },                  \
	{ "stats", required_argument, NULL, 1002 },                 \
	{ "result", required_argument, NULL, 1003 },                \
	{ "limit", required_argument, NULL, 1004 },                 \
	{ "warmup", required_argument, NULL, 1005 },                \
	{ "duration", required_argument, NULL, 1006 }

#define LOAD_RUN_USAGE                                                                        \
	"  --ports LIST       the servers' ports (\"11300-11347\" or \"11300,11302\")\n"          \
	"  --host ADDR        the servers' IPv4 address (default 127.0.0.1)\n"                   \
	"  --cpus LIST        a thread per CPU, pinned\n"                                    \
	"  --stats PATH       live counters for the harness (else standalone: timed by\n"      \
	"                     --warmup S and --duration S, a summary printed)\n"             \
	"  --result PATH      the window's counts and latency percentiles, as JSON\n"        \
	"  --limit S          stop by itself after S seconds (default 600)\n"

#endif
