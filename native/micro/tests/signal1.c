/* Sends itself a signal and takes it: the signal path, and in thread mode the shared sighand lock. */
#include "../micro.h"
#include <errno.h>
#include <signal.h>
#include <string.h>

static void on_usr1(int sig)
{
	(void)sig;
}

static int init(struct micro_task *t)
{
	struct sigaction sa;
	(void)t;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	return sigaction(SIGUSR1, &sa, NULL) ? errno : 0;
}

static void run(struct micro_task *t)
{
	for (;;) {
		MICRO_FAIL_ON(t, raise(SIGUSR1), "raise");
		micro_count(t);
	}
}

MICRO_TEST(signal1, .description = "raise(SIGUSR1) to self and handle it", .init = init, .run = run);
