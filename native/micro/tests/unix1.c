/* Unix stream socket ping-pong: the socket layer and its wakeups, without the network stack. */
#include "pingpong.h"
#include <sys/socket.h>

static int init(struct micro_task *t)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return errno;
	return pingpong_start(t, sv[0], sv[0], sv[1], sv[1]);
}

MICRO_TEST(unix1, .description = "unix socketpair ping-pong with a partner on the same CPU",
	   .init = init, .run = pingpong_run);
