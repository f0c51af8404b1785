#include "run.h"

#include "control.h"
#include "cpulist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

uint64_t load_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool load_stopping(const struct load_run *r)
{
	return stop_requested || atomic_load_explicit(&r->stats.hdr->state, memory_order_relaxed) != LOAD_RUNNING;
}

void load_poll_phase(struct load_thread *t)
{
	t->in_window = atomic_load_explicit(&t->run->stats.hdr->phase, memory_order_relaxed) == LOAD_WINDOW;
}

void load_count(struct load_thread *t, enum load_counter c, uint64_t n)
{
	load_add(&t->run->stats, t->id, c, n);
	if (t->in_window)
		t->window[c] += n;
}

int load_next(struct load_thread *t, void *item)
{
	if (!t->pace_ns)
		return t->run->issue(t, item, load_now_ns());
	/* A ring, so the due requests go round every idle item (as many clients would) rather than keep to the
	 * few most recently freed while the rest sit until a server's idle time-out closes them. */
	t->idle[(t->idle_head + t->nidle++) % t->idle_cap] = item;
	return 0;
}

int load_start_items(struct load_thread *t)
{
	for (unsigned i = 0; i < t->nitems; i++)
		if (load_next(t, t->items[i]))
			return -1;
	return 0;
}

/*
 * Open loop: counts the issues whose intended time has come as due, and gives each, oldest first, to
 * the item idle longest. The nanoseconds until the next is due, UINT64_MAX when none is idle to take it (an
 * answer wakes the thread then); *failed set after a failed issue.
 */
static uint64_t pace(struct load_thread *t, uint64_t now, int *failed)
{
	uint64_t due = now >= t->pace_start_ns ? (now - t->pace_start_ns) / t->pace_ns + 1 : 0;
	if (due > t->counted_due) {
		load_count(t, LC_DUE, (due - t->counted_due) * t->run->per_issue);
		t->counted_due = due;
	}
	while (t->issued < due && t->nidle) {
		void *item = t->idle[t->idle_head];
		t->idle_head = (t->idle_head + 1) % t->idle_cap;
		t->nidle--;
		if (t->run->issue(t, item, t->pace_start_ns + t->issued * t->pace_ns)) {
			*failed = 1;
			return 0;
		}
		t->issued++;
	}
	if (t->issued < due) {
		uint64_t lag = now - (t->pace_start_ns + t->issued * t->pace_ns);
		if (t->in_window && lag > t->lag_max_ns)
			t->lag_max_ns = lag;
		return UINT64_MAX;
	}
	if (!t->nidle)
		return UINT64_MAX;
	return t->pace_start_ns + t->issued * t->pace_ns - now;
}

void load_latency(struct load_thread *t, uint64_t ns)
{
	if (t->in_window)
		hist_record(&t->latency, ns);
}

/* Raises the soft descriptor limit to what `need` descriptors require; a clear error when it cannot. */
static int reserve_fds(const char *name, unsigned long need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return errno;
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		fprintf(stderr, "%s: needs %lu file descriptors but the hard limit is %llu (raise it: ulimit -Hn)\n",
			name, need, (unsigned long long)rl.rlim_max);
		return EMFILE;
	}
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		fprintf(stderr, "%s: cannot raise the descriptor limit to %lu: %s\n", name, need, strerror(errno));
		return errno;
	}
	return 0;
}

int load_parse_ports(const char *s, uint16_t **ports, unsigned *n)
{
	unsigned cap = 16;
	*n = 0;
	*ports = malloc(cap * sizeof(**ports));
	while (*ports && *s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 1 || a > 65535)
			return -1;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a || b > 65535)
				return -1;
		}
		for (long p = a; p <= b; p++) {
			if (*n == cap) {
				cap *= 2;
				uint16_t *grown = realloc(*ports, cap * sizeof(**ports));
				if (!grown)
					return -1;
				*ports = grown;
			}
			(*ports)[(*n)++] = (uint16_t)p;
		}
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return *ports && *n ? 0 : -1;
}

long load_parse_number(const char *name, const char *what, const char *arg, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "%s: --%s must be a whole number from %ld to %ld, not '%s'\n", name, what, lo, hi, arg);
		exit(2);
	}
	return v;
}

static int parse_seconds(const char *arg, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 0;
}

/* Parses --ports/--host/--cpus/--stats/--result/--limit/--warmup/--duration into r; 1 if it took the
 * option, exit 2 with a message for a bad value. */
static int common_option(struct load_run *r, int opt, const char *arg)
{
	double *target = NULL;
	switch (opt) {
	case 1007:
		free(r->ports);
		if (load_parse_ports(arg, &r->ports, &r->nports)) {
			fprintf(stderr, "%s: bad port list '%s'\n", r->name, arg);
			exit(2);
		}
		return 1;
	case 1008:
		if (inet_pton(AF_INET, arg, &r->host) != 1) {
			fprintf(stderr, "%s: --host must be an IPv4 address, not '%s'\n", r->name, arg);
			exit(2);
		}
		r->host_name = arg;
		return 1;
	case 1001:
		if (cpulist_parse(arg, &r->cpus, &r->nthreads)) {
			fprintf(stderr, "%s: bad CPU list '%s'\n", r->name, arg);
			exit(2);
		}
		return 1;
	case 1002: r->stats_path = arg; return 1;
	case 1010: r->control = true; return 1;
	case 1003: r->result_path = arg; return 1;
	case 1004: target = &r->limit_s; break;
	case 1005: target = &r->warmup_s; break;
	case 1006: target = &r->duration_s; break;
	case 1009:
		if (parse_seconds(arg, &r->rate) || !(r->rate > 0)) {
			fprintf(stderr, "%s: --rate must be a number of requests per second above 0, not '%s'\n", r->name,
				arg);
			exit(2);
		}
		return 1;
	default: return 0;
	}
	if (parse_seconds(arg, target)) {
		fprintf(stderr, "%s: '%s' is not a number of seconds\n", r->name, arg);
		exit(2);
	}
	return 1;
}

/* After the options: checks the common ones and makes r->threads (id, CPU, histogram) with priv[i]
 * of priv_size bytes each as their generator state (priv may be NULL); 0, or an exit status. */
static int prepare_threads(struct load_run *r, void *priv, size_t priv_size)
{
	if (!r->nports || !r->nthreads) {
		fprintf(stderr, "%s: --ports and --cpus are required (--help)\n", r->name);
		return 2;
	}
	if (!r->host_name) {
		r->host_name = "127.0.0.1";
		inet_pton(AF_INET, r->host_name, &r->host);
	}
	r->threads = calloc(r->nthreads, sizeof(*r->threads));
	if (!r->threads) {
		fprintf(stderr, "%s: out of memory\n", r->name);
		return 1;
	}
	if (!r->per_issue)
		r->per_issue = 1;
	uint64_t pace_ns = 0;
	if (r->rate) {
		double ns = 1e9 * r->per_issue * r->nthreads / r->rate;
		if (ns < 1 || ns > 60e9) {
			fprintf(stderr, "%s: --rate %g gives each of %u threads an issue every %.3g ns: give a rate "
				"between %.3g and %.3g\n", r->name, r->rate, r->nthreads, ns,
				1e9 * r->per_issue * r->nthreads / 60e9, 1e9 * r->per_issue * r->nthreads);
			return 2;
		}
		pace_ns = (uint64_t)ns;
	}
	for (unsigned i = 0; i < r->nthreads; i++) {
		r->threads[i] = (struct load_thread){ .id = i, .cpu = r->cpus[i], .run = r, .epfd = -1,
						      .priv = priv ? (char *)priv + i * priv_size : NULL,
						      .pace_ns = pace_ns };
		hist_init(&r->threads[i].latency);
	}
	return 0;
}

static void *thread_main(void *p)
{
	struct load_thread *t = p;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		load_fail(&t->run->stats, "%s: cannot pin a thread to CPU %d: %s", t->run->name, t->cpu, strerror(err));
		return NULL;
	}
	if (t->pace_ns)	/* the threads' schedules interleave, so the generator's is even as a whole */
		t->pace_start_ns = load_now_ns() + t->pace_ns * t->id / t->run->nthreads;
	return t->run->thread_fn(t);
}

static void sleep_until(uint64_t deadline_ns, const struct load_run *r)
{
	while (!load_stopping(r)) {
		uint64_t now = load_now_ns();
		if (now >= deadline_ns)
			return;
		uint64_t step = deadline_ns - now < 10000000ull ? deadline_ns - now : 10000000ull;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)step };
		nanosleep(&ts, NULL);
	}
}

/* Gives every thread an epoll set and its share of the n items, each `size` bytes from `items`: item i
 * goes to thread i mod threads, so every thread gets an even share. 0, or 1 after a message; free_run
 * releases them. */
static int share_items(struct load_run *r, void *items, size_t size, unsigned n)
{
	for (unsigned i = 0; i < r->nthreads; i++) {
		struct load_thread *t = &r->threads[i];
		t->epfd = epoll_create1(EPOLL_CLOEXEC);
		t->items = calloc(n / r->nthreads + 1, sizeof(*t->items));
		t->idle_cap = n / r->nthreads + 1;
		t->idle = calloc(t->idle_cap, sizeof(*t->idle));
		if (t->epfd < 0 || !t->items || !t->idle) {
			fprintf(stderr, "%s: epoll: %s\n", r->name, strerror(errno));
			return 1;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct load_thread *t = &r->threads[i % r->nthreads];
		t->items[t->nitems++] = (char *)items + i * size;
	}
	return 0;
}

int load_tcp_connect(struct load_thread *t, uint16_t port, void *item)
{
	const struct load_run *r = t->run;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		load_fail(&r->stats, "%s: socket: %s", r->name, strerror(errno));
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = r->host };
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) && errno != EINPROGRESS) {
		load_fail(&r->stats, "%s: connect to %s:%u: %s", r->name, r->host_name, port,
			  errno == EADDRNOTAVAIL ? "out of local ports (TIME_WAIT?)" : strerror(errno));
		close(fd);
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = item };
	epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
	return fd;
}

void load_watch(struct load_thread *t, int fd, void *item, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = item };
	epoll_ctl(t->epfd, EPOLL_CTL_MOD, fd, &ev);
}

void load_epoll_loop(struct load_thread *t, int (*on_event)(struct load_thread *t, void *item, uint32_t events),
		     int (*scan)(struct load_thread *t, uint64_t now))
{
	const uint64_t scan_ns = 10000000ull;
	struct epoll_event events[256];
	uint64_t next_scan = load_now_ns() + scan_ns;
	while (!load_stopping(t->run)) {
		load_poll_phase(t);
		/* Closed loop, answers wake the thread; open loop, so does the next due request (to the
		 * nanosecond: a millisecond's sleep past it would be counted as the server's latency). */
		struct timespec wait = { .tv_sec = 0, .tv_nsec = 10000000 };
		if (t->pace_ns) {
			int failed = 0;
			uint64_t until = pace(t, load_now_ns(), &failed);
			if (failed)
				return;
			if (until < (uint64_t)wait.tv_nsec)
				wait.tv_nsec = (long)until;
		}
		int n = epoll_pwait2(t->epfd, events, 256, &wait, NULL);
		if (n < 0 && errno != EINTR) {
			load_fail(&t->run->stats, "%s: epoll_wait: %s", t->run->name, strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++)
			if (on_event(t, events[i].data.ptr, events[i].events))
				return;
		uint64_t now = load_now_ns();
		if (now < next_scan)
			continue;
		next_scan = now + scan_ns;
		if (scan(t, now))
			return;
	}
}

void load_write_latency(FILE *f, const char *key, const struct hist *h)
{
	fprintf(f, "\"%s\": {\"count\": %llu, \"min\": %llu, \"p50\": %llu, \"p90\": %llu, \"p99\": %llu, "
		"\"p999\": %llu, \"max\": %llu}", key, (unsigned long long)h->count,
		(unsigned long long)(h->count ? h->min : 0), (unsigned long long)hist_percentile(h, 0.50),
		(unsigned long long)hist_percentile(h, 0.90), (unsigned long long)hist_percentile(h, 0.99),
		(unsigned long long)hist_percentile(h, 0.999), (unsigned long long)h->max);
}

static void write_result(struct load_run *r, const uint64_t *window, const struct hist *lat, double window_s,
			 uint64_t lag_max_ns, const struct load_control *control)
{
	char tmp[4096];
	FILE *f = stdout;
	if (r->control) {
		fputs("RESULT\n", f);
	} else {
		if (!r->result_path)
			return;
		if (snprintf(tmp, sizeof(tmp), "%s.new", r->result_path) >= (int)sizeof(tmp))
			return;
		f = fopen(tmp, "w");
		if (!f) {
			fprintf(stderr, "%s: %s: %s\n", r->name, tmp, strerror(errno));
			return;
		}
	}
	fprintf(f, "{\"window_s\": %.6f, \"threads\": %u, \"sent\": %llu, \"done\": %llu, \"lost\": %llu, "
		"\"errors\": %llu, \"late\": %llu, \"bytes\": %llu,\n ",
		window_s, r->nthreads, (unsigned long long)window[LC_SENT], (unsigned long long)window[LC_DONE],
		(unsigned long long)window[LC_LOST], (unsigned long long)window[LC_ERRORS],
		(unsigned long long)window[LC_LATE], (unsigned long long)window[LC_BYTES]);
	if (r->rate)
		fprintf(f, "\"rate\": %.3f, \"due\": %llu, \"lag_max_ns\": %llu,\n ", r->rate,
			(unsigned long long)window[LC_DUE], (unsigned long long)lag_max_ns);
	load_write_latency(f, "latency_ns", lat);
	if (r->describe) {
		fputs(",\n ", f);
		r->describe(r, f);
	}
	if (r->control) {
		fputs(",\n ", f);
		load_control_describe(f, r, control, lat);
		fputs("}\n", f);
		fflush(f);
		return;
	}
	fputs("}\n", f);
	if (fclose(f) || rename(tmp, r->result_path))
		fprintf(stderr, "%s: %s: %s\n", r->name, r->result_path, strerror(errno));
}

/* Starts the threads, waits for the end, writes the result; the program's exit status. */
static int run_threads(struct load_run *r)
{
	if (!r->nthreads) {
		fprintf(stderr, "%s: --cpus is required\n", r->name);
		return 2;
	}
	if (!r->stats_path && !r->control && !r->duration_s) {
		fprintf(stderr, "%s: give --stats PATH or --control (harness) or --duration S (standalone)\n", r->name);
		return 2;
	}
	if (!r->limit_s)
		r->limit_s = 600;
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	int err = load_stats_create(&r->stats, r->stats_path, r->nthreads);
	if (err) {
		fprintf(stderr, "%s: %s: %s\n", r->name, r->stats_path ? r->stats_path : "stats", strerror(err));
		return 1;
	}
	/* Standalone, the generator times its own window; with the harness, the harness writes the phase. */
	atomic_store(&r->stats.hdr->phase, LOAD_WARMUP);
	atomic_store(&r->stats.hdr->state, LOAD_RUNNING);
	pthread_t *tids = calloc(r->nthreads, sizeof(*tids));
	if (!tids) {
		fprintf(stderr, "%s: out of memory\n", r->name);
		return 1;
	}
	unsigned started = 0;
	for (; started < r->nthreads; started++) {
		struct load_thread *t = &r->threads[started];
		err = pthread_create(&tids[started], NULL, thread_main, t);
		if (err) {
			load_fail(&r->stats, "%s: cannot start thread %u: %s", r->name, started, strerror(err));
			break;
		}
	}
	uint64_t start = load_now_ns();
	uint64_t limit = start + (uint64_t)(r->limit_s * 1e9);
	uint64_t window_start = 0, window_end = 0;
	struct load_control control = { 0 };
	if (r->control) {
		load_control_loop(r, limit, &window_start, &window_end, &control);
	} else if (!r->stats_path) {
		window_start = start + (uint64_t)(r->warmup_s * 1e9);
		window_end = window_start + (uint64_t)(r->duration_s * 1e9);
		sleep_until(window_start < limit ? window_start : limit, r);
		atomic_store(&r->stats.hdr->phase, LOAD_WINDOW);
		window_start = load_now_ns();
		sleep_until(window_end < limit ? window_end : limit, r);
		atomic_store(&r->stats.hdr->phase, LOAD_AFTER);
		window_end = load_now_ns();
	} else {
		/* The harness's window: timed here as the span the phase said WINDOW, seen every 10 ms. */
		while (!load_stopping(r) && load_now_ns() < limit) {
			uint32_t phase = atomic_load(&r->stats.hdr->phase);
			if (phase == LOAD_WINDOW && !window_start)
				window_start = load_now_ns();
			if (phase == LOAD_AFTER && window_start && !window_end)
				window_end = load_now_ns();
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };
			nanosleep(&ts, NULL);
		}
		if (window_start && !window_end)
			window_end = load_now_ns();
	}
	uint32_t running = LOAD_RUNNING;
	atomic_compare_exchange_strong(&r->stats.hdr->state, &running, LOAD_STOPPED);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	uint64_t window[LC_COUNT] = { 0 };
	struct hist *lat = malloc(sizeof(*lat));
	if (!lat) {
		fprintf(stderr, "%s: out of memory\n", r->name);
		return 1;
	}
	hist_init(lat);
	uint64_t lag_max_ns = 0;
	for (unsigned i = 0; i < started; i++) {
		for (int c = 0; c < LC_COUNT; c++)
			window[c] += r->threads[i].window[c];
		hist_merge(lat, &r->threads[i].latency);
		if (r->threads[i].lag_max_ns > lag_max_ns)
			lag_max_ns = r->threads[i].lag_max_ns;
	}
	double window_s = window_end > window_start ? (double)(window_end - window_start) / 1e9 : 0;
	write_result(r, window, lat, window_s, lag_max_ns, &control);
	if (!r->stats_path && !r->control) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("SUMMARY sent=%llu done=%llu lost=%llu errors=%llu late=%llu bytes=%llu due=%llu window_s=%.3f "
		       "per_sec=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f\n",
		       (unsigned long long)window[LC_SENT], (unsigned long long)window[LC_DONE],
		       (unsigned long long)window[LC_LOST], (unsigned long long)window[LC_ERRORS],
		       (unsigned long long)window[LC_LATE], (unsigned long long)window[LC_BYTES],
		       (unsigned long long)window[LC_DUE], window_s, window_s ? (double)window[LC_DONE] / window_s : 0,
		       hist_percentile(lat, 0.5) / 1e3, hist_percentile(lat, 0.99) / 1e3,
		       hist_percentile(lat, 0.999) / 1e3);
	}
	free(lat);
	if (atomic_load(&r->stats.hdr->state) == LOAD_FAILED) {
		fprintf(stderr, "%s\n", r->stats.hdr->fail_what);
		return 1;
	}
	return 0;
}

/* Frees what load_main allocated in r (threads and their epoll sets, CPU list, ports, statistics). */
static void free_run(struct load_run *r)
{
	if (r->stats.hdr && r->stats.hdr != MAP_FAILED)
		munmap(r->stats.hdr, r->stats.size);
	for (unsigned i = 0; r->threads && i < r->nthreads; i++) {
		if (r->threads[i].epfd >= 0)
			close(r->threads[i].epfd);
		free(r->threads[i].items);
		free(r->threads[i].idle);
	}
	free(r->threads);
	free(r->cpus);
	free(r->ports);
	r->ports = NULL;
	r->stats.hdr = NULL;
	r->threads = NULL;
	r->cpus = NULL;
}

#define GO_ON -1 /* parse_options: the run goes on (anything else is the program's exit status) */
#define MAX_OPTIONS 64

static const struct option common_options[] = {
	{ "ports", required_argument, NULL, 1007 },
	{ "host", required_argument, NULL, 1008 },
	{ "cpus", required_argument, NULL, 1001 },
	{ "stats", required_argument, NULL, 1002 },
	{ "result", required_argument, NULL, 1003 },
	{ "limit", required_argument, NULL, 1004 },
	{ "warmup", required_argument, NULL, 1005 },
	{ "duration", required_argument, NULL, 1006 },
	{ "rate", required_argument, NULL, 1009 },
	{ "control", no_argument, NULL, 1010 },
};

/* The generator's options, --help and the common ones; GO_ON, or the exit status of a run that ends here. */
static int parse_options(int argc, char **argv, struct load_run *r)
{
	const size_t ncommon = sizeof(common_options) / sizeof(common_options[0]);
	struct option all[MAX_OPTIONS];
	size_t n = 0;
	while (r->options && r->options[n].name)
		n++;
	if (n + 1 + ncommon + 1 > MAX_OPTIONS) {
		fprintf(stderr, "%s: more than %d options\n", r->name, MAX_OPTIONS);
		return 2;
	}
	memcpy(all, r->options, n * sizeof(*all));
	all[n] = (struct option){ "help", no_argument, NULL, 'h' };
	memcpy(all + n + 1, common_options, sizeof(common_options));
	all[n + 1 + ncommon] = (struct option){ 0 };
	int opt;
	while ((opt = getopt_long(argc, argv, "", all, NULL)) != -1) {
		if (common_option(r, opt, optarg))
			continue;
		if (opt == 'h') {
			r->usage();
			return 0;
		}
		if (r->option(r, opt, optarg)) {
			r->usage();
			return 2;
		}
	}
	return GO_ON;
}

/*
 * The generator's r->nitems items, with the descriptors they need: item i goes to port i mod ports and
 * (share_items) thread i mod threads, so every port and every thread gets an even share. 0, or 1.
 */
static int make_items(struct load_run *r)
{
	/* A socket per item and an epoll set per thread, with room for the process's own. */
	if (reserve_fds(r->name, (unsigned long)r->nitems + r->nthreads + 64))
		return 1;
	r->items = calloc(r->nitems, r->item_size);
	if (!r->items)
		return 1;
	for (unsigned i = 0; i < r->nitems; i++)
		r->init_item(r, (char *)r->items + i * r->item_size, i, r->ports[i % r->nports]);
	return share_items(r, r->items, r->item_size, r->nitems) ? 1 : 0;
}

int load_main(int argc, char **argv, struct load_run *r)
{
	int status = parse_options(argc, argv, r);
	if (status != GO_ON)
		return status;
	void *thread_privs = NULL;
	if (r->thread_priv_size && !(thread_privs = calloc(r->nthreads ? r->nthreads : 1, r->thread_priv_size)))
		status = 1;
	else
		status = prepare_threads(r, thread_privs, r->thread_priv_size);
	if (!status)
		status = r->prepare(r);
	if (!status)
		status = make_items(r);
	if (!status && r->open_items)
		status = r->open_items(r);
	if (!status) {
		status = run_threads(r);
		if (r->finish)
			status = r->finish(r, status);
	}
	for (unsigned i = 0; r->items && i < r->nitems; i++)
		r->free_item((char *)r->items + i * r->item_size);
	free(r->items);
	r->items = NULL;
	free(thread_privs);
	free_run(r);
	return status;
}
