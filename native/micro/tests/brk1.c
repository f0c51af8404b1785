/* Grows and shrinks the heap by one page: mmap_lock taken for write twice per iteration. */
#include "../micro.h"
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

static void run(struct micro_task *t)
{
	/* Raw brk, so glibc's idea of the break (and its malloc arena) is never moved below its own. */
	long base = syscall(SYS_brk, 0);
	for (;;) {
		long top = syscall(SYS_brk, base + 4096);
		MICRO_FAIL_ON(t, top < base + 4096, "brk grow");
		syscall(SYS_brk, base);
		micro_count(t);
	}
}

MICRO_TEST(brk1, .description = "brk() up and down one page (mmap_lock for write)", .run = run);
