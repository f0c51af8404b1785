/*
 * One byte written and read back on the task's own pipe or unix socket pair: no partner, no sleep, the
 * pipe and socket paths alone. pipe_create is mosbench's own: pipe() and closing both ends, the pipefs
 * inode and two files allocated and freed per iteration.
 */
#include "../micro.h"
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

static void loop_back(struct micro_task *t, int in, int out)
{
	char c = 0;
	for (;;) {
		MICRO_FAIL_ON(t, write(out, &c, 1) != 1, "write");
		MICRO_FAIL_ON(t, read(in, &c, 1) != 1, "read");
		micro_count(t);
	}
}

static void run_pipe(struct micro_task *t)
{
	int fds[2];
	MICRO_FAIL_ON(t, pipe(fds), "pipe");
	loop_back(t, fds[0], fds[1]);
}

static void run_unix(struct micro_task *t)
{
	int fds[2];
	MICRO_FAIL_ON(t, socketpair(AF_UNIX, SOCK_STREAM, 0, fds), "socketpair");
	loop_back(t, fds[0], fds[1]);
}

static void run_pipe_create(struct micro_task *t)
{
	for (;;) {
		int fds[2];
		MICRO_FAIL_ON(t, pipe(fds), "pipe");
		close(fds[0]);
		close(fds[1]);
		micro_count(t);
	}
}

MICRO_TEST(pipe1, .description = "pipe read/write", .run = run_pipe);
MICRO_TEST(unix1, .description = "unix domain socket read/write", .run = run_unix);
MICRO_TEST(pipe_create, .description = "mosbench: pipe() and close of both ends (pipefs inode and files)",
	   .run = run_pipe_create);
