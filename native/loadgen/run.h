/*
 * What every load generator shares: a thread per CPU, pinned; the live statistics file; the phase
 * (warm-up, window, after) set by the harness or, standalone, by the clock; a stop on SIGTERM, SIGINT
 * or the time limit; and at the end one result file with the window's counts and latency percentiles.
 * And the whole of a generator's main (load_main): the common options, the threads, the descriptors,
 * the generator's items (connections, contexts, sessions) spread over the ports and the threads, the
 * run, the cleanup. A generator fills a struct load_run with its hooks and its thread function, which
 * loops until load_stopping() and counts through load_count() and load_latency().
 *
 * Closed loop (the default), an item sends its next request as soon as its last is answered. Open
 * loop (--rate R), requests are due on a schedule, R per second over the whole generator, each thread
 * its share at even intervals: a due request goes to any idle item of the thread, and waits for one if
 * none is idle. Its latency counts from its intended send time, not from when it went out, so a server
 * that stalls its client cannot hide the queue that builds (wrk2's correction of coordinated omission);
 * the requests due in the window (LC_DUE) against those sent tell whether the client kept its schedule.
 * A generator starts an item's next request only through load_next(), and r->issue does the starting.
 */
#ifndef MOSBENCH_LOAD_RUN_H
#define MOSBENCH_LOAD_RUN_H

#include "hist.h"
#include "stats.h"

#include <getopt.h>
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
	int epfd;			/* its epoll set, made by load_main (else -1) */
	void **items;			/* its share of the generator's items (sockets, sessions) */
	unsigned nitems;
	void *priv;			/* the generator's own per-thread state, if it has any */
	/* Open loop: the schedule (issue k intended at pace_start + k * pace_ns) and the idle items. */
	uint64_t pace_ns, pace_start_ns, issued, counted_due;
	void **idle;			/* a ring of idle_cap: nidle items from idle_head */
	unsigned idle_cap, idle_head, nidle;
	uint64_t lag_max_ns;		/* window: the longest a due issue waited for an idle item */
};

struct load_run {
	/* The generator's part, filled before load_main; hooks marked optional may be NULL. */
	const char *name;		/* for messages: "mosbench-memload" */
	const struct option *options;	/* its own long options, { 0 }-ended, none of them 'h'; load_main
					 * adds --help and the common ones (LOAD_RUN_USAGE) */
	/* Takes one of its own options: 0, or -1 if opt is none of them (usage, exit 2). */
	int (*option)(struct load_run *r, int opt, const char *arg);
	void (*usage)(void);		/* for --help and a bad option */
	size_t thread_priv_size;	/* each thread's priv: this many bytes, zeroed (0: none) */
	/* After the options are checked and the threads made: sets nitems; 0, or an exit status. */
	int (*prepare)(struct load_run *r);
	size_t item_size;		/* the size of one of the generator's items */
	/* Item i, zeroed, goes to port i mod ports (and, shared out, to thread i mod threads). */
	void (*init_item)(struct load_run *r, void *item, unsigned i, uint16_t port);
	/* Optional: once the items are shared out among the threads; 0, or an exit status. */
	int (*open_items)(struct load_run *r);
	void *(*thread_fn)(struct load_thread *t);
	/* Starts the item's next request (or, memload, batch of per_issue requests) now; its latency counts
	 * from intended_ns (earlier than now when the item was late for its schedule). 0, or -1 after
	 * load_fail. */
	int (*issue)(struct load_thread *t, void *item, uint64_t intended_ns);
	unsigned per_issue;		/* requests one issue sends; 0 means 1 */
	/* Lines of the generator's own for the result file: "key": value pairs, comma-separated. */
	void (*describe)(struct load_run *r, FILE *out);
	/* Optional: after the run, given its exit status; the program's exit status. */
	int (*finish)(struct load_run *r, int status);
	/* Closes the item's socket, if it has one open, and frees what it holds. */
	void (*free_item)(void *item);
	void *priv;

	/* Filled by load_main. */
	int *cpus;
	unsigned nthreads;
	uint16_t *ports;		/* the servers' ports, on host */
	unsigned nports;
	struct in_addr host;
	const char *host_name;
	const char *stats_path;		/* harness mode; NULL: standalone */
	bool control;			/* --control: driven over standard input and output (control.h) */
	const char *result_path;
	double limit_s;			/* stops by itself after this long, whatever happens */
	double warmup_s, duration_s;	/* standalone: the window the generator times itself */
	double rate;			/* --rate: requests per second over all threads; 0: closed loop */
	struct load_stats stats;
	struct load_thread *threads;
	void *items;			/* nitems (set by prepare) of item_size bytes */
	unsigned nitems;
};

/*
 * A load generator's main: parses the common options and the generator's own, makes the threads, calls
 * prepare, reserves the descriptors, makes the items, shares them among the threads, opens them, runs,
 * calls finish and frees everything; the program's exit status.
 */
int load_main(int argc, char **argv, struct load_run *r);

uint64_t load_now_ns(void);
bool load_stopping(const struct load_run *r);
/* The item is free for its next request: closed loop, issued now; open loop, idle until one is due.
 * 0, or -1 after load_fail. */
int load_next(struct load_thread *t, void *item);
/* Every item of the thread to load_next: the start of a generator's thread. */
int load_start_items(struct load_thread *t);
/* Re-reads the phase: call once per loop iteration. */
void load_poll_phase(struct load_thread *t);
void load_count(struct load_thread *t, enum load_counter c, uint64_t n);
void load_latency(struct load_thread *t, uint64_t ns);
/* A non-blocking TCP_NODELAY socket connecting to the servers' host at port, added to the thread's
 * epoll set for EPOLLOUT with item as its data; -1 after load_fail. */
int load_tcp_connect(struct load_thread *t, uint16_t port, void *item);
/* Changes the events the thread's epoll set waits for on fd (added by load_tcp_connect). */
void load_watch(struct load_thread *t, int fd, void *item, uint32_t events);
/* A generator thread's loop, until the run stops or a callback fails (returning non-zero, after
 * load_fail): each event of its epoll set to on_event with its data.ptr, every 10 ms scan(now) for
 * time-outs, and, open loop, every due request to an idle item, waking for the next due. */
void load_epoll_loop(struct load_thread *t, int (*on_event)(struct load_thread *t, void *item, uint32_t events),
		     int (*scan)(struct load_thread *t, uint64_t now));
/* `"key": {count, min, p50, p90, p99, p999, max}` of a histogram, for a result file. */
void load_write_latency(FILE *f, const char *key, const struct hist *h);
/* A port list ("11300-11347" or "11300,11302") into a new array; 0, or -1 if malformed. */
int load_parse_ports(const char *s, uint16_t **ports, unsigned *n);
/* A whole number in [lo, hi] for --what, or a message and exit 2. */
long load_parse_number(const char *name, const char *what, const char *arg, long lo, long hi);

#define LOAD_RUN_USAGE                                                                        \
	"  --ports LIST       the servers' ports (\"11300-11347\" or \"11300,11302\")\n"          \
	"  --host ADDR        the servers' IPv4 address (default 127.0.0.1)\n"                   \
	"  --cpus LIST        a thread per CPU, pinned\n"                                    \
	"  --stats PATH       live counters for the harness (else standalone: timed by\n"      \
	"                     --warmup S and --duration S, a summary printed)\n"             \
	"  --result PATH      the window's counts and latency percentiles, as JSON\n"        \
	"  --control          driven over standard input/output (another machine over SSH);\n" \
	"                     the result, with its histogram, printed at the end\n"          \
	"  --limit S          stop by itself after S seconds (default 600)\n"                  \
	"  --rate R           open loop: R requests per second in all, on a schedule, latency\n" \
	"                     from each one's intended send time (default: closed loop)\n"

#endif
