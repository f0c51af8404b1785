/* Small allocations stay in glibc's per-thread cache: a user-space allocator's scaling, no kernel. */
#include "../micro.h"
#include <errno.h>
#include <stdlib.h>

static void run(struct micro_task *t)
{
	for (;;) {
		void *volatile p = malloc(1024);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_count(t);
	}
}

MICRO_TEST(malloc2, .description = "malloc/free of 1 KB (allocator fast path)", .run = run);
