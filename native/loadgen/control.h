/*
 * A generator on another machine, driven over a pipe (an SSH session's standard input and output)
 * instead of the shared statistics file: `--control`. The harness writes one-letter commands, a line
 * each, and reads one reply line per command:
 *
 *   t   T <realtime ns>                 the host's clock, for the harness to measure its offset
 *   s   S <state> <counter>...          cumulative totals over threads, in enum load_counter's order
 *   w   W <realtime ns>                 the window opens now (the phase the harness writes locally)
 *   a   A <realtime ns>                 the window closes now
 *   q   (none)                          stop; end of input stops too, so a lost session stops the run
 *
 * A failure is announced unasked as `F <message>`. At the end the generator prints `RESULT` on a line
 * and then the window's result as JSON, with what merging hosts exactly needs: the latency histogram's
 * buckets (added bucket by bucket, never percentiles averaged), the process's CPU time over the window
 * and the host's own /proc/stat over the window, in all and on the generator's CPUs.
 */
#ifndef MOSBENCH_LOAD_CONTROL_H
#define MOSBENCH_LOAD_CONTROL_H

#include "hist.h"

#include <stdint.h>
#include <stdio.h>

struct load_run;

/* What the window cost the host, read at each end. */
struct load_usage {
	uint64_t real_ns;	/* CLOCK_REALTIME: when, on the host's own clock */
	double user_s, system_s;	/* this process (getrusage) */
	double host_busy_s, host_idle_s;	/* every CPU of the host, /proc/stat */
	double cpus_busy_s, cpus_idle_s;	/* the generator's own CPUs */
	unsigned host_cpus;
};

struct load_control {
	struct load_usage open, close;
	int opened, closed;
};

/* The harness's loop in control mode: commands until q, end of input, failure or limit_ns (monotonic);
 * sets the phase and the window's start and end (monotonic ns) as the commands say. */
void load_control_loop(struct load_run *r, uint64_t limit_ns, uint64_t *window_start, uint64_t *window_end,
		       struct load_control *c);
/* The control-mode additions to the result: `"hist": …, "usage": …`, no leading or trailing comma. */
void load_control_describe(FILE *f, const struct load_run *r, const struct load_control *c, const struct hist *lat);

#endif
