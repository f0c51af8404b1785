/* Pipe ping-pong with a partner on the same CPU: wakeup and context switch cost. */
#include "pingpong.h"

static int init(struct micro_task *t)
{
	int to_partner[2], to_task[2];
	if (pipe(to_partner) || pipe(to_task))
		return errno;
	return pingpong_start(t, to_task[0], to_partner[1], to_partner[0], to_task[1]);
}

MICRO_TEST(context_switch1, .description = "pipe ping-pong with a partner on the same CPU (round trips)",
	   .init = init, .run = pingpong_run);
