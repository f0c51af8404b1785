/* The baseline: a syscall that touches no shared state; its per-core line must stay flat. */
#include "../micro.h"
#include <unistd.h>

static void run(struct micro_task *t)
{
	for (;;) {
		getppid();
		micro_count(t);
	}
}

MICRO_TEST(getppid1, .description = "getppid(): syscall entry and exit only", .run = run);
