/*
 * Descriptor tests: dup/close (the descriptor table, shared by threads), poll of 1 and of 128 files
 * (a file reference taken and dropped per descriptor), eventfd write and read.
 */
#include "file.h"
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#define POLL_MANY 128

static void run_dup(struct micro_task *t)
{
	int fd = file_fd(t);
	for (;;) {
		int copy = dup(fd);
		MICRO_FAIL_ON(t, copy < 0, "dup");
		close(copy);
		micro_count(t);
	}
}

/* The task's own unlinked files; their descriptors in a malloc'd array in t->priv. */
static int init_files(struct micro_task *t, int n)
{
	int *fds = malloc((size_t)n * sizeof(*fds));
	if (!fds)
		return ENOMEM;
	for (int i = 0; i < n; i++) {
		int err = micro_tmpfile(t->workdir, 0, &fds[i]);
		if (err)
			return err;
	}
	t->priv = fds;
	return 0;
}

static int init_poll1(struct micro_task *t)
{
	return init_files(t, 1);
}

static int init_poll2(struct micro_task *t)
{
	return init_files(t, POLL_MANY);
}

/* Threads hold every task's 128 files in one process: room for all of them, as will-it-scale makes. */
static int prepare_poll2(void *shared, const char *workdir, unsigned ntasks)
{
	(void)shared;
	(void)workdir;
	(void)ntasks;
	struct rlimit lim;
	rlim_t want = (rlim_t)(POLL_MANY + 10) * (rlim_t)sysconf(_SC_NPROCESSORS_CONF);
	if (getrlimit(RLIMIT_NOFILE, &lim))
		return errno;
	if (lim.rlim_cur >= want)
		return 0;
	lim.rlim_cur = want;
	if (lim.rlim_max < want)
		lim.rlim_max = want;
	return setrlimit(RLIMIT_NOFILE, &lim) ? errno : 0;
}

/*
 * Inlined, so each test's loop is built for its constant n: poll1's is will-it-scale's, an 8-byte clear
 * and two stores. Called with n at run time it was a memset call and a loop, 7% of poll1's ops/s.
 */
static inline __attribute__((always_inline)) void poll_files(struct micro_task *t, int n)
{
	const int *fds = t->priv;
	struct pollfd pfd[POLL_MANY];
	for (;;) {
		/* Filled every time, as a caller of poll() does and as will-it-scale does. */
		memset(pfd, 0, sizeof(pfd[0]) * (size_t)n);
		for (int i = 0; i < n; i++) {
			pfd[i].fd = fds[i];
			pfd[i].events = POLLOUT;
		}
		MICRO_FAIL_ON(t, poll(pfd, (nfds_t)n, 0) < 0, "poll");
		micro_count(t);
	}
}

static void run_poll1(struct micro_task *t)
{
	poll_files(t, 1);
}

static void run_poll2(struct micro_task *t)
{
	poll_files(t, POLL_MANY);
}

static void run_eventfd(struct micro_task *t)
{
	uint64_t value = 1;
	int fd = eventfd(0, 0);
	MICRO_FAIL_ON(t, fd < 0, "eventfd");
	for (;;) {
		MICRO_FAIL_ON(t, write(fd, &value, sizeof(value)) != sizeof(value), "eventfd write");
		MICRO_FAIL_ON(t, read(fd, &value, sizeof(value)) != sizeof(value), "eventfd read");
		micro_count(t);
	}
}

MICRO_TEST(dup1, .description = "Separate file dup/close", .init = file_init_private_empty, .run = run_dup);
MICRO_TEST(poll1, .description = "poll of 1 fd", .init = init_poll1, .run = run_poll1);
MICRO_TEST(poll2, .description = "poll of 128 fds", .prepare = prepare_poll2, .init = init_poll2,
	   .run = run_poll2);
MICRO_TEST(eventfd1, .description = "eventfd read/write of 8 bytes", .run = run_eventfd);
