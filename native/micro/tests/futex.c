/*
 * futex(2) calls that find nothing to do, on a word of the task's own stack: WAKE with no waiter, and
 * WAIT whose expected value does not match (EAGAIN at once). The shared forms hash by the page (the
 * mm and address after a page lookup), the _PRIVATE forms by the mm and address alone.
 */
#include "../micro.h"
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FUTEX_TEST(name, op, desc)                                                  \
	static void run_##name(struct micro_task *t)                                \
	{                                                                           \
		for (;;) {                                                          \
			uint32_t word = 0;                                          \
			syscall(SYS_futex, &word, op, 1, NULL, NULL, 0);            \
			micro_count(t);                                             \
		}                                                                   \
	}                                                                           \
	MICRO_TEST(name, .description = desc, .run = run_##name)

FUTEX_TEST(futex1, FUTEX_WAKE, "futex(FUTEX_WAKE)");
FUTEX_TEST(futex2, FUTEX_WAIT, "futex(FUTEX_WAIT)");
FUTEX_TEST(futex3, FUTEX_WAKE_PRIVATE, "futex(FUTEX_WAKE_PRIVATE)");
FUTEX_TEST(futex4, FUTEX_WAIT_PRIVATE, "futex(FUTEX_WAIT_PRIVATE)");
