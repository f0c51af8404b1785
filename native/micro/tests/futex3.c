/* FUTEX_WAKE on one word shared by every task: all hit the same hash bucket and its lock. */
#include "../micro.h"
#include "futex.h"

static void run(struct micro_task *t)
{
	for (;;) {
		futex(t->shared, FUTEX_WAKE, 1);
		micro_count(t);
	}
}

MICRO_TEST(futex3, .description = "FUTEX_WAKE on one shared word, no waiters (one hash bucket)",
	   .shared_size = 64, .run = run);
