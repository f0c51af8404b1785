/*
 * job.h - what the native job programs (mosbench-metis, mosbench-psearchy) share with the harness:
 * the start protocol (say "ready", start on SIGUSR1, so the harness times the job alone), a monotonic
 * clock, and files that appear only when complete. Header-only: each program includes it once.
 */
#ifndef MOSBENCH_JOB_H
#define MOSBENCH_JOB_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Parses a whole decimal number in [0, max]: no sign, no trailing text, no overflow. 0, or -1. */
static inline int job_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

static inline double job_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Prints `ready_line` and blocks until SIGUSR1. Call before starting any thread, so none takes it;
 * SIGUSR1 stays blocked, so a second one cannot end the job. */
static inline void job_wait_start(const char *ready_line)
{
	sigset_t set;
	int sig;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("%s\n", ready_line);
	fflush(stdout);
	sigwait(&set, &sig);
}

/*
 * Writes `path` through `path.partial`, renamed into place only when every byte is out: a failed
 * write (a full disk included) leaves nothing that looks like a result. Returns 0 or an errno.
 */
static inline int job_write_atomically(const char *path, int (*fill)(FILE *f, const void *arg), const void *arg)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.partial", path) >= (int)sizeof(tmp))
		return ENAMETOOLONG;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return errno;
	int err = fill(f, arg);
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	if (!err && rename(tmp, path))
		err = errno;
	if (err)
		unlink(tmp);
	return err;
}

#endif
