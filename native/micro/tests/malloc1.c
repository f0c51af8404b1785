/* A large malloc is an mmap/munmap pair inside glibc: address-space lock traffic per iteration. */
#include "../micro.h"
#include <errno.h>
#include <stdlib.h>

#define SIZE (128UL << 20)

static void run(struct micro_task *t)
{
	for (;;) {
		void *p = malloc(SIZE);
		MICRO_FAIL_ON(t, !p, "malloc");
		free(p);
		micro_count(t);
	}
}

MICRO_TEST(malloc1, .description = "malloc/free of 128 MB (glibc's mmap path)", .run = run);
