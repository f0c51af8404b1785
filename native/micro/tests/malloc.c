/* malloc/free: 128 MB goes to glibc's mmap path (address-space lock), 1 KB stays in its thread cache. */
#include "../micro.h"
#include <errno.h>
#include <stdlib.h>

static void run_large(struct micro_task *t)
{
	for (;;) {
		void *volatile p = malloc(128UL << 20);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_count(t);
	}
}

static void run_small(struct micro_task *t)
{
	for (;;) {
		void *volatile p = malloc(1024);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_count(t);
	}
}

MICRO_TEST(malloc1, .description = "malloc/free of 128MB", .run = run_large);
MICRO_TEST(malloc2, .description = "malloc/free of 1kB", .run = run_small);
