#include "control.h"

#include "run.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double timeval_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int is_generator_cpu(const struct load_run *r, long cpu)
{
	for (unsigned i = 0; i < r->nthreads; i++)
		if (r->cpus[i] == cpu)
			return 1;
	return 0;
}

/* /proc/stat's busy (user, nice, system, irq, softirq) and idle (idle, iowait) seconds, in all and on the
 * generator's CPUs; steal and guest time are neither (a guest's steal is its host's business). */
static void read_proc_stat(const struct load_run *r, struct load_usage *u)
{
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return;
	double tick = (double)sysconf(_SC_CLK_TCK);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "cpu", 3))
			break;
		unsigned long long v[8] = { 0 };
		char name[32];
		if (sscanf(line, "%31s %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1], &v[2], &v[3], &v[4],
			   &v[5], &v[6], &v[7]) < 8)
			continue;
		double busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / tick;
		double idle = (double)(v[3] + v[4]) / tick;
		if (!strcmp(name, "cpu")) {
			u->host_busy_s = busy;
			u->host_idle_s = idle;
			continue;
		}
		u->host_cpus++;
		if (is_generator_cpu(r, strtol(name + 3, NULL, 10))) {
			u->cpus_busy_s += busy;
			u->cpus_idle_s += idle;
		}
	}
	fclose(f);
}

static void take_usage(const struct load_run *r, struct load_usage *u)
{
	memset(u, 0, sizeof(*u));
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	u->user_s = timeval_s(ru.ru_utime);
	u->system_s = timeval_s(ru.ru_stime);
	read_proc_stat(r, u);
	u->real_ns = realtime_ns();
}

static void reply(const char *fmt, unsigned long long v)
{
	printf(fmt, v);
	fflush(stdout);
}

static void reply_totals(const struct load_run *r)
{
	uint64_t totals[LC_COUNT] = { 0 };
	for (unsigned t = 0; t < r->nthreads; t++)
		for (int c = 0; c < LC_COUNT; c++)
			totals[c] += atomic_load_explicit(load_counter(&r->stats, t, c), memory_order_relaxed);
	printf("S %u", (unsigned)atomic_load(&r->stats.hdr->state));
	for (int c = 0; c < LC_COUNT; c++)
		printf(" %llu", (unsigned long long)totals[c]);
	putchar('\n');
	fflush(stdout);
}

/* One command; 1 when it says stop. */
static int command(struct load_run *r, char cmd, uint64_t *window_start, uint64_t *window_end,
		   struct load_control *c)
{
	switch (cmd) {
	case 't':
		reply("T %llu\n", (unsigned long long)realtime_ns());
		return 0;
	case 's':
		reply_totals(r);
		return 0;
	case 'w':
		if (!c->opened) {
			take_usage(r, &c->open);
			atomic_store(&r->stats.hdr->phase, LOAD_WINDOW);
			*window_start = load_now_ns();
			c->opened = 1;
		}
		reply("W %llu\n", (unsigned long long)c->open.real_ns);
		return 0;
	case 'a':
		if (c->opened && !c->closed) {
			atomic_store(&r->stats.hdr->phase, LOAD_AFTER);
			*window_end = load_now_ns();
			take_usage(r, &c->close);
			c->closed = 1;
		}
		reply("A %llu\n", (unsigned long long)(c->closed ? c->close.real_ns : 0));
		return 0;
	case 'q':
		return 1;
	default:
		fprintf(stderr, "%s: unknown command '%c'\n", r->name, cmd);
		return 0;
	}
}

void load_control_loop(struct load_run *r, uint64_t limit_ns, uint64_t *window_start, uint64_t *window_end,
		       struct load_control *c)
{
	printf("READY %u\n", r->nthreads);
	fflush(stdout);
	char buf[256];
	int stop = 0;
	while (!stop && !load_stopping(r) && load_now_ns() < limit_ns) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		int n = poll(&p, 1, 10);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));
		if (got <= 0)	/* the session ended: nobody is left to read a result */
			break;
		for (ssize_t i = 0; i < got && !stop; i++)
			if (buf[i] != '\n' && buf[i] != '\r' && buf[i] != ' ')
				stop = command(r, buf[i], window_start, window_end, c);
	}
	if (c->opened && !c->closed) {
		*window_end = load_now_ns();
		take_usage(r, &c->close);
		c->closed = 1;
	}
	if (atomic_load(&r->stats.hdr->state) == LOAD_FAILED) {
		printf("F %s\n", r->stats.hdr->fail_what);
		fflush(stdout);
	}
}

void load_control_describe(FILE *f, const struct load_run *r, const struct load_control *c, const struct hist *lat)
{
	fprintf(f, "\"hist\": {\"sub_bits\": %u, \"min\": %llu, \"max\": %llu, \"buckets\": [", HIST_SUB_BITS,
		(unsigned long long)(lat->count ? lat->min : 0), (unsigned long long)lat->max);
	const char *sep = "";
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (!lat->buckets[i])
			continue;
		fprintf(f, "%s[%u, %llu]", sep, i, (unsigned long long)lat->buckets[i]);
		sep = ", ";
	}
	fputs("]},\n ", f);
	const struct load_usage *a = &c->open, *b = &c->close;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	fprintf(f, "\"usage\": {\"hostname\": \"%s\", \"host_cpus\": %u, \"cpus\": %u, \"window_open_ns\": %llu, "
		"\"window_close_ns\": %llu, \"user_s\": %.6f, \"system_s\": %.6f, \"host_busy_s\": %.3f, "
		"\"host_idle_s\": %.3f, \"cpus_busy_s\": %.3f, \"cpus_idle_s\": %.3f}",
		host, b->host_cpus, r->nthreads, (unsigned long long)a->real_ns, (unsigned long long)b->real_ns,
		b->user_s - a->user_s, b->system_s - a->system_s, b->host_busy_s - a->host_busy_s,
		b->host_idle_s - a->host_idle_s, b->cpus_busy_s - a->cpus_busy_s, b->cpus_idle_s - a->cpus_idle_s);
}
