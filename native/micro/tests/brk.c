/*
 * brk(2) up and down one page: mmap_lock for write twice per iteration, each call counted. brk1 moves
 * the break from where it is (threads share one break); brk2 first takes a page of its own with sbrk.
 * glibc's brk/sbrk, as will-it-scale calls them; nothing in the loop allocates.
 */
#include "../micro.h"
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

static void cycle(struct micro_task *t, char *addr)
{
	long page = getpagesize();
	for (;;) {
		MICRO_FAIL_ON(t, brk(addr + page), "brk up");
		MICRO_FAIL_ON(t, brk(addr), "brk down");
		micro_add(t, 2);
	}
}

static void run_current(struct micro_task *t)
{
	cycle(t, sbrk(0));
}

static void run_own_page(struct micro_task *t)
{
	long page = getpagesize();
	char *mine = sbrk(page);
	MICRO_FAIL_ON(t, mine == (void *)-1, "sbrk");
	cycle(t, mine + page);
}

MICRO_TEST(brk1, .description = "brk increase/decrease of one page", .run = run_current);
MICRO_TEST(brk2, .description = "brk unshared increase/decrease of one page", .run = run_own_page);
