/* poll() over 128 idle descriptors with a zero timeout: file reference get/put per descriptor. */
#include "../micro.h"
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#define NFDS 128

static int init(struct micro_task *t)
{
	struct pollfd *pfd = calloc(NFDS, sizeof(*pfd));
	if (!pfd)
		return ENOMEM;
	for (int i = 0; i < NFDS; i++) {
		pfd[i].fd = eventfd(0, 0);
		pfd[i].events = POLLIN;
		if (pfd[i].fd < 0)
			return errno;
	}
	t->priv = pfd;
	return 0;
}

static void run(struct micro_task *t)
{
	for (;;) {
		MICRO_FAIL_ON(t, poll(t->priv, NFDS, 0) < 0, "poll");
		micro_count(t);
	}
}

MICRO_TEST(poll1, .description = "poll() on 128 idle eventfds, zero timeout", .init = init, .run = run);
