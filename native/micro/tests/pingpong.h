/*
 * One-byte ping-pong between a task and a partner pinned to the same CPU, over descriptors the caller
 * sets up: each round trip is two wakeups and two context switches.
 */
#ifndef MOSBENCH_MICRO_PINGPONG_H
#define MOSBENCH_MICRO_PINGPONG_H

#include "../micro.h"
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

struct pingpong {
	struct micro_task *task;
	int task_in, task_out;		/* the task reads task_in, writes task_out */
	int partner_in, partner_out;
};

static inline void pingpong_partner(void *arg)
{
	struct pingpong *pp = arg;
	char c;
	for (;;) {
		if (read(pp->partner_in, &c, 1) != 1)
			micro_fail(pp->task, "partner read", errno);
		if (write(pp->partner_out, &c, 1) != 1)
			micro_fail(pp->task, "partner write", errno);
	}
}

/* Takes ownership of the four descriptors and starts the partner. */
static inline int pingpong_start(struct micro_task *t, int task_in, int task_out, int partner_in,
				 int partner_out)
{
	struct pingpong *pp = malloc(sizeof(*pp));
	if (!pp)
		return ENOMEM;
	*pp = (struct pingpong){ t, task_in, task_out, partner_in, partner_out };
	t->priv = pp;
	return micro_spawn_partner(t, pingpong_partner, pp);
}

/* Round trips, each counted as `per_trip` (will-it-scale's context_switch1 counts both messages). */
static inline void pingpong_loop(struct micro_task *t, uint64_t per_trip)
{
	const struct pingpong *pp = t->priv;
	char c = 'p';
	for (;;) {
		MICRO_FAIL_ON(t, write(pp->task_out, &c, 1) != 1, "write");
		MICRO_FAIL_ON(t, read(pp->task_in, &c, 1) != 1, "read");
		micro_add(t, per_trip);
	}
}

#endif
