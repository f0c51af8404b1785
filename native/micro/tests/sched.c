/* Process-level calls: getppid (the baseline, touching nothing shared), sched_yield, signal delivery. */
#include "../micro.h"
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void run_getppid(struct micro_task *t)
{
	for (;;) {
		getppid();
		micro_count(t);
	}
}

/* With one task per CPU there is nothing to yield to: a trip through the scheduler. */
static void run_sched_yield(struct micro_task *t)
{
	for (;;) {
		MICRO_FAIL_ON(t, sched_yield(), "sched_yield");
		micro_count(t);
	}
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* raise() signals the calling thread; in thread mode the handler table and its lock are shared. */
static int init_signal(struct micro_task *t)
{
	struct sigaction sa;
	(void)t;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	return sigaction(SIGUSR1, &sa, NULL) ? errno : 0;
}

static void run_signal(struct micro_task *t)
{
	for (;;) {
		raise(SIGUSR1);
		micro_count(t);
	}
}

MICRO_TEST(getppid1, .description = "getppid", .run = run_getppid);
MICRO_TEST(sched_yield, .description = "sched_yield", .run = run_sched_yield);
MICRO_TEST(signal1, .description = "signal delivery", .init = init_signal, .run = run_signal);
