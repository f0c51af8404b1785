/* Pipe ping-pong with a partner on the same CPU; each message (one context switch) counts. */
#include "pingpong.h"

static int init(struct micro_task *t)
{
	int to_partner[2], to_task[2];
	if (pipe(to_partner) || pipe(to_task))
		return errno;
	return pingpong_start(t, to_task[0], to_partner[1], to_partner[0], to_task[1]);
}

static void run(struct micro_task *t)
{
	pingpong_loop(t, 2);
}

MICRO_TEST(context_switch1, .description = "Context switch via pipes", .init = init, .run = run);
