/* With one task per CPU there is nothing to yield to: the cost of a trip through the scheduler. */
#include "../micro.h"
#include <sched.h>

static void run(struct micro_task *t)
{
	for (;;) {
		sched_yield();
		micro_count(t);
	}
}

MICRO_TEST(sched_yield1, .description = "sched_yield() with no other runnable task", .run = run);
