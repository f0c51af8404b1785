/* mosbench's own: TCP ping-pong over 127.0.0.1, the full loopback network stack per round trip. */
#include "pingpong.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int init(struct micro_task *t)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int one = 1, err = 0;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	int cfd = socket(AF_INET, SOCK_STREAM, 0);
	int sfd = -1;

	/* Port 0: the kernel picks a free ephemeral port, so tasks never collide with anything. */
	if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) ||
	    connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) || (sfd = accept(lfd, NULL, NULL)) < 0)
		err = errno;
	if (lfd >= 0)
		close(lfd);
	if (err)
		return err;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return pingpong_start(t, cfd, cfd, sfd, sfd);
}

static void run(struct micro_task *t)
{
	pingpong_loop(t, 1);
}

MICRO_TEST(tcp_pingpong, .description = "mosbench: TCP ping-pong over 127.0.0.1 with a partner on the same "
	   "CPU (round trips)", .init = init, .run = run);
