/*
 * malloc/free: 128 MB goes to glibc's mmap path (address-space lock), 1 KB stays in its thread cache.
 * The pointer stays in a register, as in will-it-scale's loop (a volatile local added a store and a load
 * to every call); the null check is what keeps GCC from dropping the malloc/free pair.
 */
#include "../micro.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define LARGE (128UL << 20)

/* glibc serves it with an mmap of the size and a page of its own bookkeeping. */
static int init_large(struct micro_task *t)
{
	(void)t;
	return micro_fence_mappings(LARGE + (size_t)getpagesize());
}

static void run_large(struct micro_task *t)
{
	for (;;) {
		void *p = malloc(LARGE);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_count(t);
	}
}

static void run_small(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	for (;;) {
		void *p = malloc(1024);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_inc(ops);
	}
}

MICRO_TEST(malloc1, .description = "malloc/free of 128MB", .init = init_large, .run = run_large);
MICRO_TEST(malloc2, .description = "malloc/free of 1kB", .run = run_small);
