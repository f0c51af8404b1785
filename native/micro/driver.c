/*
 * mosbench-micro: runs one will-it-scale style testcase on a list of CPUs, one task per CPU.
 *
 * Three process roles keep stopping simple and complete:
 *   supervisor  this process: owns the scratch directory and the counter region, samples, stops;
 *   host        a child in its own process group, which executes this program afresh (--host): runs
 *               prepare() and starts the tasks;
 *   tasks       processes forked by the host (procs mode) or threads of the host (threads mode),
 *               plus any partner a ping-pong test starts, all inside the host's process group.
 * Stopping is one kill(-host, SIGKILL): every task and partner goes with it, by the group we made.
 * Every process below the supervisor also has PR_SET_PDEATHSIG, so a killed supervisor leaves none.
 *
 * The host executes itself rather than running on in the forked copy, so tasks run in (threads) or are
 * forked from (procs) a process with an address space of its own, as will-it-scale's are. It matters to
 * the kernel: an anonymous mapping inherited through fork carries its parent's anon_vma chain, and the
 * kernel will not merge a new region into it, so brk(2) on an inherited heap adds and removes a VMA of
 * its own where on the process's own heap it grows and splits the heap (brk1 in threads mode read 1.30x
 * will-it-scale's from a forked host). The counters and the test's shared area are memfds (or the
 * harness's counters file) whose descriptors the host inherits and maps again.
 *
 * With --counters PATH the counter region is a file the mosbench harness maps to read the per-task
 * counters whenever it samples; the driver then just runs until SIGTERM/SIGINT or --timeout. Without
 * it the driver samples by itself once a second, warms up, and prints a SUMMARY line.
 */
#include "micro.h"

#include "cpulist.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MICRO_MAGIC "MOSMICR1"
#define MICRO_VERSION 1
#define SLOT_STRIDE 128
#define SLOTS_OFFSET 256
#define READY_TIMEOUT_S 300
#define MAX_PARAMS 16

enum micro_state { STATE_STARTING, STATE_RUNNING, STATE_FAILED, STATE_STOPPED };

/* Layout read by mosbench/workloads/micro.py: keep both in step (MICRO_VERSION). */
struct micro_header {
	char magic[8];
	uint32_t version;
	uint32_t ntasks;
	uint32_t slot_stride;
	uint32_t slots_offset;
	_Atomic uint32_t state;
	_Atomic uint32_t ready;
	_Atomic uint32_t go;
	_Atomic int32_t fail_errno;
	_Atomic int32_t fail_task;
	char fail_what[128];
};

_Static_assert(sizeof(struct micro_header) <= SLOTS_OFFSET, "header overlaps the counter slots");

extern const struct micro_test *const __start_micro_tests[];
extern const struct micro_test *const __stop_micro_tests[];

struct driver {
	const struct micro_test *test;
	enum micro_mode mode;
	int *cpus;
	unsigned ntasks;
	char workdir[4096];
	struct micro_header *hdr;
	size_t region_size;
	void *shared;
	unsigned nparams;
	struct {
		char name[32];
		long value;
	} params[MAX_PARAMS];
};

/* The task-side view of the run; set once in the host before tasks start, read-only afterwards. */
static const struct driver *host_run;
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* Only interrupts the supervisor's sleep: a task or host that ends is noticed at once. */
static void on_child(int sig)
{
	(void)sig;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9) };
	nanosleep(&ts, NULL);
}

static _Atomic uint64_t *slot(struct micro_header *hdr, unsigned nr)
{
	return (_Atomic uint64_t *)((char *)hdr + SLOTS_OFFSET + (size_t)nr * SLOT_STRIDE);
}

static int pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? errno : 0;
}

static void record_failure(struct micro_header *hdr, int task, const char *what, int err)
{
	int32_t none = -2;
	/* First failure wins: it is the cause, later ones are usually its echoes. */
	if (atomic_compare_exchange_strong(&hdr->fail_task, &none, task)) {
		snprintf(hdr->fail_what, sizeof(hdr->fail_what), "%s", what);
		atomic_store(&hdr->fail_errno, err);
	}
	atomic_store(&hdr->state, STATE_FAILED);
}

_Noreturn void micro_fail(struct micro_task *t, const char *what, int err)
{
	record_failure(host_run->hdr, (int)t->nr, what, err);
	/* _exit is exit_group: in thread mode it ends the whole host, which the supervisor notices. */
	_exit(1);
}

long micro_param(const char *name, long def)
{
	for (unsigned i = 0; i < host_run->nparams; i++)
		if (!strcmp(host_run->params[i].name, name))
			return host_run->params[i].value;
	return def;
}

static int add_param(struct driver *r, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *end;
	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(r->params[0].name) || r->nparams == MAX_PARAMS)
		return -1;
	long v = strtol(eq + 1, &end, 10);
	if (end == eq + 1 || *end)
		return -1;
	memcpy(r->params[r->nparams].name, arg, (size_t)(eq - arg));
	r->params[r->nparams].name[eq - arg] = 0;
	r->params[r->nparams++].value = v;
	return 0;
}

int micro_path(char *buf, size_t len, const char *workdir, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "%s/", workdir);
	if (n < 0 || (size_t)n >= len)
		return ENAMETOOLONG;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return (m < 0 || (size_t)(n + m) >= len) ? ENAMETOOLONG : 0;
}

/*
 * One write of the whole size, as will-it-scale fills its files: the page cache then holds the file in
 * the folios one large write makes (large folios on ext4, xfs and tmpfs in recent kernels), where 4 KB
 * writes leave a folio per page, and tasks reading one file contend on far fewer folios' reference
 * counts (read2 at two processes read 1.75x will-it-scale's with 4 KB fills).
 */
int micro_fill(int fd, size_t size)
{
	char *zeros = calloc(1, size ? size : 1);
	if (!zeros)
		return ENOMEM;
	int err = 0;
	for (size_t done = 0; done < size;) {
		ssize_t w = write(fd, zeros + done, size - done);
		if (w <= 0) {
			err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	free(zeros);
	return err;
}

int micro_make_file(const char *path, size_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return errno;
	int err = micro_fill(fd, size);
	if (close(fd) && !err)
		err = errno;
	return err;
}

int micro_tmpfile(const char *dir, int flags, int *fd)
{
	*fd = open(dir, O_TMPFILE | O_RDWR | flags, 0600);
	if (*fd >= 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != EISDIR)
		return errno;
	/* A filesystem without O_TMPFILE: a unique name, removed at once. */
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/tmp.XXXXXX", dir) >= (int)sizeof(path))
		return ENAMETOOLONG;
	*fd = mkostemp(path, flags);
	if (*fd < 0)
		return errno;
	unlink(path);
	return 0;
}

int micro_fence_mappings(size_t size)
{
	size_t page = (size_t)getpagesize();
	char *spot = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (spot == MAP_FAILED)
		return errno;
	munmap(spot, size);
	void *fence = mmap(spot + size - page, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			   -1, 0);
	/* EEXIST: a thread of the same process probed the same spot first and its fence stands there. */
	return fence == MAP_FAILED && errno != EEXIST ? errno : 0;
}

struct partner_start {
	void (*fn)(void *);
	void *arg;
};

static void *partner_thread(void *p)
{
	struct partner_start s = *(struct partner_start *)p;
	free(p);
	s.fn(s.arg);
	return NULL;
}

int micro_spawn_partner(struct micro_task *t, void (*fn)(void *arg), void *arg)
{
	if (t->mode == MICRO_THREADS) {
		pthread_t th;
		pthread_attr_t attr;
		cpu_set_t set;
		struct partner_start *s = malloc(sizeof(*s));
		if (!s)
			return ENOMEM;
		s->fn = fn;
		s->arg = arg;
		CPU_ZERO(&set);
		CPU_SET(t->cpu, &set);
		pthread_attr_init(&attr);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		int err = pthread_create(&th, &attr, partner_thread, s);
		pthread_attr_destroy(&attr);
		if (err)
			free(s);
		else
			pthread_detach(th);
		return err;
	}
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fn(arg);
		_exit(0);
	}
	return 0;
}

static void task_main(const struct driver *r, unsigned nr)
{
	struct micro_task t = {
		.nr = nr,
		.ntasks = r->ntasks,
		.cpu = r->cpus[nr],
		.mode = r->mode,
		.workdir = r->workdir,
		.shared = r->shared,
		.iterations = slot(r->hdr, nr),
	};
	int err = pin_to(t.cpu);
	if (err)
		micro_fail(&t, "sched_setaffinity (is the CPU online and in this cpuset?)", err);
	if (r->test->init && (err = r->test->init(&t)))
		micro_fail(&t, "init", err);
	atomic_fetch_add(&r->hdr->ready, 1);
	/* The gate: nobody counts until every task is set up, so the window sees all of them at work. */
	while (!atomic_load_explicit(&r->hdr->go, memory_order_acquire))
		sleep_s(0.0005);
	r->test->run(&t);
	micro_fail(&t, "run() returned", 0);
}

static void *task_thread(void *p)
{
	/* As will-it-scale's threads (which it cancels at the end): glibc then skips the two atomic
	 * updates of the thread's cancel state around every cancellation-point call (close, read, write,
	 * poll, ...). Left deferred, they cost dup1 and pipe1 10-13% at one thread. Nothing cancels ours. */
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	task_main(host_run, (unsigned)(uintptr_t)p);
	return NULL;
}

/*
 * will-it-scale's tasks find descriptors 3 to 5 taken (its shared area and a pipe) and open theirs from 6;
 * ours found 3 free. Where a test's descriptors sit moves tests that share one descriptor table: dup1
 * threads at 2 tasks ran 11-35% slower (every round, interleaved, same binary) with its files at 3 and 4
 * than at 6 and 7, while holding 3 more descriptors elsewhere (50-52) did not help: the numbers matter,
 * not the count (likely fd_array's first slots on the cache line of the table's file_lock). So the host
 * holds 3 to 5 and every test's descriptors are numbered as will-it-scale's (docs/WORKLOADS.md, micro).
 */
#define MICRO_FIRST_FD 6

static void hold_low_descriptors(void)
{
	for (;;) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		if (fd >= MICRO_FIRST_FD) {
			close(fd);
			return;
		}
	}
}

static _Noreturn void host_main(const struct driver *r)
{
	host_run = r;
	hold_low_descriptors();
	if (r->test->prepare) {
		int err = r->test->prepare(r->shared, r->workdir, r->ntasks);
		if (err) {
			record_failure(r->hdr, -1, "prepare", err);
			_exit(1);
		}
	}
	if (r->mode == MICRO_THREADS) {
		for (unsigned i = 0; i < r->ntasks; i++) {
			pthread_t th;
			int err = pthread_create(&th, NULL, task_thread, (void *)(uintptr_t)i);
			if (err) {
				record_failure(r->hdr, (int)i, "pthread_create", err);
				_exit(1);
			}
		}
		for (;;)
			pause();
	}
	for (unsigned i = 0; i < r->ntasks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			record_failure(r->hdr, (int)i, "fork", errno);
			_exit(1);
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			task_main(r, i);
		}
	}
	/* Tasks never end on their own: the first one that does is a failure. */
	int status;
	pid_t pid = wait(&status);
	if (atomic_load(&r->hdr->state) != STATE_FAILED) {
		char what[96];
		snprintf(what, sizeof(what), "task process %d ended (status 0x%x)", (int)pid, status);
		record_failure(r->hdr, -1, what, 0);
	}
	_exit(1);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static uint64_t total_iterations(struct micro_header *hdr, unsigned n, uint64_t *per_task)
{
	uint64_t sum = 0;
	for (unsigned i = 0; i < n; i++) {
		per_task[i] = atomic_load_explicit(slot(hdr, i), memory_order_relaxed);
		sum += per_task[i];
	}
	return sum;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mosbench-micro --list\n"
		"       mosbench-micro --test NAME --cpus LIST [--mode procs|threads] [--workdir PARENT]\n"
		"                      [--counters PATH | --warmup S --duration S] [--timeout S]\n"
		"                      [--param NAME=INTEGER ...] [--aslr]\n");
}

static const struct micro_test *find_test(const char *name)
{
	for (const struct micro_test *const *t = __start_micro_tests; t < __stop_micro_tests; t++)
		if (!strcmp((*t)->name, name))
			return *t;
	return NULL;
}

static int cmp_test(const void *a, const void *b)
{
	return strcmp((*(const struct micro_test *const *)a)->name,
		      (*(const struct micro_test *const *)b)->name);
}

static void list_tests(void)
{
	size_t n = (size_t)(__stop_micro_tests - __start_micro_tests);
	const struct micro_test **v = malloc(n * sizeof(*v));
	if (!v)
		return;
	memcpy(v, __start_micro_tests, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_test);
	for (size_t i = 0; i < n; i++)
		printf("%s\t%s\n", v[i]->name, v[i]->description);
	free(v);
}

/*
 * Moves into the parent directory (default /tmp, will-it-scale's) and makes the run's scratch directory
 * there, named relative to it: the tests' paths then have will-it-scale's depth.
 */
static int make_workdir(char *out, size_t len, const char *parent)
{
	if (chdir(parent ? parent : "/tmp"))
		return errno;
	if (snprintf(out, len, "micro.XXXXXX") >= (int)len)
		return ENAMETOOLONG;
	return mkdtemp(out) ? 0 : errno;
}

static int self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n <= 0)
		return n < 0 ? errno : ENOENT;
	buf[n] = 0;
	return 0;
}

/*
 * Runs the rest of the program with address-space randomisation off, as will-it-scale's runtest does
 * (setarch -R): where the heap and mappings land changes brk, mmap and page-fault costs by 10% or more
 * from one start to the next. One re-exec; if it cannot be had, the run goes on randomised. --aslr
 * skips it, for suites whose own program runs randomised (FxMark): one fixed layout is one draw of the
 * randomised ones, and a slow draw reads as a gap (FxMark's MRPM under setarch -R: 0.92 of its own).
 */
static void without_aslr(char **argv)
{
	int persona = personality(0xffffffff);
	if (persona < 0 || (persona & ADDR_NO_RANDOMIZE))
		return;
	char self[4096];
	if (self_exe(self, sizeof(self)) || personality((unsigned long)persona | ADDR_NO_RANDOMIZE) < 0)
		return;
	execv(self, argv); /* by its own name, so ps and perf still say mosbench-micro */
}

/*
 * In the forked host: executes this program again with the supervisor's arguments and --host, which
 * names the descriptors of the counters and the shared area and the scratch directory.
 */
static _Noreturn void exec_host(int argc, char **argv, int cfd, int sfd, const struct driver *r)
{
	char self[4096], spec[sizeof(r->workdir) + 32];
	char **args = calloc((size_t)argc + 3, sizeof(*args));
	int err = args ? self_exe(self, sizeof(self)) : ENOMEM;
	if (!err) {
		snprintf(spec, sizeof(spec), "%d,%d,%s", cfd, sfd, r->workdir);
		memcpy(args, argv, (size_t)argc * sizeof(*args));
		args[argc] = "--host";
		args[argc + 1] = spec;
		execv(self, args);
		err = errno;
	}
	record_failure(r->hdr, -1, "exec of the host", err);
	_exit(1);
}

/* The executed host: maps what the supervisor made and starts the tasks. */
static _Noreturn void host_resume(struct driver *r, const char *spec)
{
	int cfd, sfd, at = 0;
	if (sscanf(spec, "%d,%d,%n", &cfd, &sfd, &at) != 2 || !at || strlen(spec + at) >= sizeof(r->workdir))
		_exit(1);
	r->hdr = mmap(NULL, r->region_size, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
	if (r->hdr == MAP_FAILED)
		_exit(1); /* nothing to record it in: the supervisor reports the host's end */
	close(cfd);
	if (r->test->shared_size) {
		r->shared = mmap(NULL, r->test->shared_size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
		if (r->shared == MAP_FAILED) {
			record_failure(r->hdr, -1, "mmap of the shared area", errno);
			_exit(1);
		}
		close(sfd);
	}
	strcpy(r->workdir, spec + at);
	host_main(r);
}

/* What the command line asks of the supervisor; the test, mode, CPUs and parameters go to struct driver. */
struct settings {
	const char *counters;		/* the harness's counters file; NULL: standalone */
	const char *workdir_parent;	/* where the scratch directory goes; NULL: /tmp */
	const char *host_spec;		/* only in the executed host: what exec_host passed it */
	bool standalone;		/* no --counters: the driver samples, warms up and prints a SUMMARY */
	bool aslr;			/* keep address-space randomisation as the program started with it */
	double warmup, duration, timeout;
};

/* What came of the run, for report(). */
struct outcome {
	bool started;			/* every task was ready and the gate opened */
	bool host_gone;			/* the host ended before the supervisor stopped it */
	int host_status;		/* its wait status, once reaped */
};

#define GO_ON -1 /* parse_options: the run goes on (anything else is the program's exit status) */

/* The options into r (test, mode, CPUs, parameters) and s; GO_ON, or the exit status of a run that ends here. */
static int parse_options(int argc, char **argv, struct driver *r, struct settings *s)
{
	const char *test_name = NULL, *cpus = NULL;
	static const struct option opts[] = {
		{ "list", no_argument, NULL, 'l' },	  { "test", required_argument, NULL, 't' },
		{ "mode", required_argument, NULL, 'm' }, { "cpus", required_argument, NULL, 'c' },
		{ "counters", required_argument, NULL, 'C' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "warmup", required_argument, NULL, 'W' },
		{ "duration", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "param", required_argument, NULL, 'p' },
		{ "aslr", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ "host", required_argument, NULL, 'H' }, /* internal: the executed host (exec_host) */
		{ 0 }
	};

	*s = (struct settings){ .warmup = 1, .duration = 5, .timeout = 3600 };
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 'l':
			list_tests();
			return 0;
		case 't': test_name = optarg; break;
		case 'm':
			if (!strcmp(optarg, "procs"))
				r->mode = MICRO_PROCS;
			else if (!strcmp(optarg, "threads"))
				r->mode = MICRO_THREADS;
			else {
				fprintf(stderr, "mosbench-micro: --mode must be procs or threads\n");
				return 2;
			}
			break;
		case 'c': cpus = optarg; break;
		case 'C': s->counters = optarg; break;
		case 'w': s->workdir_parent = optarg; break;
		case 'W': s->warmup = atof(optarg); break;
		case 'd': s->duration = atof(optarg); break;
		case 'T': s->timeout = atof(optarg); break;
		case 'p':
			if (add_param(r, optarg)) {
				fprintf(stderr, "mosbench-micro: bad --param '%s' (NAME=INTEGER, at most %d)\n", optarg,
					MAX_PARAMS);
				return 2;
			}
			break;
		case 'a': s->aslr = true; break;
		case 'h': usage(stdout); return 0;
		case 'H': s->host_spec = optarg; break;
		default: usage(stderr); return 2;
		}
	}
	if (!test_name || !cpus) {
		usage(stderr);
		return 2;
	}
	if (!(r->test = find_test(test_name))) {
		fprintf(stderr, "mosbench-micro: unknown test '%s' (see --list)\n", test_name);
		return 2;
	}
	if (r->test->threads_only && r->mode != MICRO_THREADS) {
		fprintf(stderr, "mosbench-micro: %s runs in threads mode only\n", test_name);
		return 2;
	}
	if (cpulist_parse(cpus, &r->cpus, &r->ntasks)) {
		fprintf(stderr, "mosbench-micro: bad CPU list '%s'\n", cpus);
		return 2;
	}
	s->standalone = !s->counters;
	r->region_size = SLOTS_OFFSET + (size_t)r->ntasks * SLOT_STRIDE;
	return GO_ON;
}

/*
 * The counter region, mapped at r->hdr with its header written: the harness's file with --counters,
 * else a memfd; its descriptor in *cfd, for the host. 0, or an exit status after a message.
 */
static int make_counters(struct driver *r, const char *counters, int *cfd)
{
	char counters_tmp[4096];
	if (counters) {
		/* Made under a temporary name and renamed once the header is written: whoever sees the file
		 * sees it whole (the harness once read a header that was not written yet). */
		if (snprintf(counters_tmp, sizeof(counters_tmp), "%s.new", counters) >= (int)sizeof(counters_tmp)) {
			fprintf(stderr, "mosbench-micro: %s: %s\n", counters, strerror(ENAMETOOLONG));
			return 1;
		}
		*cfd = open(counters_tmp, O_RDWR | O_CREAT | O_EXCL, 0644);
	} else {
		snprintf(counters_tmp, sizeof(counters_tmp), "memfd");
		*cfd = memfd_create("mosbench-micro-counters", 0);
	}
	if (*cfd < 0 || ftruncate(*cfd, (off_t)r->region_size)) {
		fprintf(stderr, "mosbench-micro: %s: %s\n", counters_tmp, strerror(errno));
		return 1;
	}
	r->hdr = mmap(NULL, r->region_size, PROT_READ | PROT_WRITE, MAP_SHARED, *cfd, 0);
	if (r->hdr == MAP_FAILED) {
		perror("mosbench-micro: mmap");
		return 1;
	}
	memcpy(r->hdr->magic, MICRO_MAGIC, 8);
	r->hdr->version = MICRO_VERSION;
	r->hdr->ntasks = r->ntasks;
	r->hdr->slot_stride = SLOT_STRIDE;
	r->hdr->slots_offset = SLOTS_OFFSET;
	atomic_store(&r->hdr->fail_task, -2);
	if (counters && rename(counters_tmp, counters)) {
		fprintf(stderr, "mosbench-micro: %s: %s\n", counters, strerror(errno));
		unlink(counters_tmp);
		return 1;
	}
	return 0;
}

/* The test's shared area, if it has one: a memfd mapped at r->shared, its descriptor in *sfd (else -1). */
static int make_shared(struct driver *r, int *sfd)
{
	*sfd = -1;
	if (!r->test->shared_size)
		return 0;
	*sfd = memfd_create("mosbench-micro-shared", 0);
	if (*sfd < 0 || ftruncate(*sfd, (off_t)r->test->shared_size) ||
	    (r->shared = mmap(NULL, r->test->shared_size, PROT_READ | PROT_WRITE, MAP_SHARED, *sfd, 0)) == MAP_FAILED) {
		perror("mosbench-micro: shared area");
		return 1;
	}
	return 0;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction child = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };
	sigaction(SIGCHLD, &child, NULL);
	/* Output goes to a pipe the harness reads; a vanished reader must not kill us before cleanup. */
	signal(SIGPIPE, SIG_IGN);
}

/* Forks the host, in a process group of its own, to execute this program again (exec_host); its pid or -1. */
static pid_t fork_host(int argc, char **argv, int cfd, int sfd, const struct driver *r)
{
	pid_t supervisor = getpid();
	pid_t host = fork();
	if (host == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != supervisor)
			_exit(1);
		signal(SIGTERM, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		/* A terminal's Ctrl-C or hang-up reaches the supervisor, which stops us; ignored stays ignored
		 * across the exec. */
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		exec_host(argc, argv, cfd, sfd, r);
	}
	if (host > 0)
		setpgid(host, host); /* both sides set it, so no kill(-host) can race ahead of the child's */
	return host;
}

/*
 * Everything before the tasks: the counter region, the test's shared area, the scratch directory, the
 * signal handlers, and the tasks' host, started. 0 with the host's pid in *host, or an exit status.
 */
static int set_up(int argc, char **argv, struct driver *r, const struct settings *s, pid_t *host)
{
	/*
	 * Descriptors inherited from whatever started us would go on to the host, and a forked child's
	 * table is sized for its parent's open descriptors: threads' dup1 and open1 at two tasks swing 2x
	 * with that state (2.4M ops/s with a shell's stray fd 251 open, 3.2M without). Closed, the tasks
	 * share the kernel's embedded table, as will-it-scale's do under its runtest.py.
	 */
	close_range(3, ~0U, 0);
	int cfd, sfd;
	int rc = make_counters(r, s->counters, &cfd);
	if (rc || (rc = make_shared(r, &sfd)))
		return rc;
	int err = make_workdir(r->workdir, sizeof(r->workdir), s->workdir_parent);
	if (err) {
		fprintf(stderr, "mosbench-micro: scratch directory in %s: %s\n",
			s->workdir_parent ? s->workdir_parent : "/tmp", strerror(err));
		return 1;
	}
	catch_signals();

	/*
	 * Tasks and partners orphaned by the host's death come to us, not to PID 1, so we reap the whole
	 * tree before exiting: no zombie outlives the run to keep its cgroup busy (PID 1 may reap late).
	 */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	*host = fork_host(argc, argv, cfd, sfd, r);
	if (*host < 0) {
		perror("mosbench-micro: fork");
		nftw(r->workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		return 1;
	}
	close(cfd);
	if (sfd >= 0)
		close(sfd);
	return 0;
}

/* Waits for every task to be ready, from t0, then opens the gate: o->started if it did. */
static void start_tasks(struct driver *r, pid_t host, double t0, struct outcome *o)
{
	while (atomic_load(&r->hdr->ready) < r->ntasks && atomic_load(&r->hdr->state) != STATE_FAILED) {
		if (waitpid(host, &o->host_status, WNOHANG) == host) {
			o->host_gone = true;
			break;
		}
		if (stop_requested || now_s() - t0 > READY_TIMEOUT_S)
			break;
		sleep_s(0.001);
	}
	o->started = !o->host_gone && atomic_load(&r->hdr->ready) == r->ntasks &&
		     atomic_load(&r->hdr->state) != STATE_FAILED && !stop_requested;
	if (o->started) {
		atomic_store(&r->hdr->state, STATE_RUNNING);
		atomic_store_explicit(&r->hdr->go, 1, memory_order_release);
		printf("started test=%s mode=%s tasks=%u\n", r->test->name,
		       r->mode == MICRO_PROCS ? "procs" : "threads", r->ntasks);
		fflush(stdout);
	}
}

/* Standalone sampling: the per-task counts, the window's first total, the next sample's time. */
struct sampler {
	uint64_t *per_task;
	uint64_t window_start;
	double next_sample;
	unsigned sec;
};

/* One standalone sample, printed; at the window's end the SUMMARY line too, and true. */
static bool take_sample(const struct driver *r, const struct settings *s, struct sampler *sp)
{
	uint64_t total = total_iterations(r->hdr, r->ntasks, sp->per_task);
	sp->sec++;
	printf("sample %u total=%" PRIu64 " tasks=", sp->sec, total);
	for (unsigned i = 0; i < r->ntasks; i++)
		printf("%s%" PRIu64, i ? "," : "", sp->per_task[i]);
	printf("\n");
	fflush(stdout);
	if (sp->sec == (unsigned)s->warmup)
		sp->window_start = total;
	if (sp->sec >= (unsigned)(s->warmup + s->duration)) {
		double secs = sp->sec - (unsigned)s->warmup;
		double ops = (double)(total - sp->window_start) / secs;
		printf("SUMMARY test=%s mode=%s tasks=%u warmup=%u duration=%.0f ops_per_sec=%.0f "
		       "ops_per_sec_per_task=%.0f\n",
		       r->test->name, r->mode == MICRO_PROCS ? "procs" : "threads", r->ntasks,
		       (unsigned)s->warmup, secs, ops, ops / r->ntasks);
		return true;
	}
	sp->next_sample += 1;
	return false;
}

/* Until a stop request, the deadline, a failure or the host's end; standalone, until the window is over. */
static void watch(const struct driver *r, const struct settings *s, pid_t host, double deadline,
		  struct outcome *o)
{
	struct sampler sp = { .per_task = calloc(r->ntasks, sizeof(*sp.per_task)) };
	sp.next_sample = now_s() + 1;
	while (o->started && sp.per_task) {
		if (stop_requested || now_s() > deadline)
			break;
		if (atomic_load(&r->hdr->state) == STATE_FAILED)
			break;
		if (waitpid(host, &o->host_status, WNOHANG) == host) {
			o->host_gone = true;
			break;
		}
		if (s->standalone && now_s() >= sp.next_sample && take_sample(r, s, &sp))
			break;
		/*
		 * Sleeps until the next sample (a second at most): the supervisor shares the tasks' CPUs, and
		 * frequent wake-ups cost a one-task ping-pong test 10-20% on one CPU. Signals (SIGCHLD from
		 * a failure, SIGTERM) cut the sleep short.
		 */
		double until = s->standalone ? sp.next_sample : now_s() + 1;
		if (until > deadline)
			until = deadline;
		if (until > now_s())
			sleep_s(until - now_s());
	}
	free(sp.per_task);
}

/* Kills the host's group, reaps every process left and removes the scratch directory. */
static void stop_tasks(const struct driver *r, pid_t host, struct outcome *o)
{
	kill(-host, SIGKILL);
	if (!o->host_gone)
		waitpid(host, &o->host_status, 0);
	/* Partners may have left the host's group only by dying; everything left is ours to reap. */
	kill(-host, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	nftw(r->workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Starts the tasks once all are ready, samples or waits until the run ends, stops them; what came of it in *o. */
static void supervise(struct driver *r, const struct settings *s, pid_t host, struct outcome *o)
{
	double t0 = now_s();
	*o = (struct outcome){ .started = false };
	start_tasks(r, host, t0, o);
	watch(r, s, host, t0 + s->timeout, o);
	stop_tasks(r, host, o);
}

/* A failed run's cause on stderr; the run's end in the counters' state for the harness; the exit status. */
static int report(struct driver *r, const struct outcome *o)
{
	bool failed = atomic_load(&r->hdr->state) == STATE_FAILED || o->host_gone || (!o->started && !stop_requested);
	if (!failed) {
		atomic_store(&r->hdr->state, STATE_STOPPED);
		return 0;
	}
	int ferr = atomic_load(&r->hdr->fail_errno);
	int ftask = atomic_load(&r->hdr->fail_task);
	if (ftask != -2)
		fprintf(stderr, "mosbench-micro: %s: task %d: %s%s%s\n", r->test->name, ftask, r->hdr->fail_what,
			ferr ? ": " : "", ferr ? strerror(ferr) : "");
	else if (o->host_gone)
		fprintf(stderr, "mosbench-micro: %s: host process ended (status 0x%x)\n", r->test->name,
			o->host_status);
	else
		fprintf(stderr, "mosbench-micro: %s: tasks not ready after %d s\n", r->test->name, READY_TIMEOUT_S);
	atomic_store(&r->hdr->state, STATE_FAILED);
	return 1;
}

int main(int argc, char **argv)
{
	struct driver r = { .mode = MICRO_PROCS };
	struct settings s;
	struct outcome o;
	pid_t host;

	int rc = parse_options(argc, argv, &r, &s);
	if (rc != GO_ON)
		return rc;
	if (!s.aslr)
		without_aslr(argv); /* before the host: it and the tasks inherit the layout's personality */
	if (s.host_spec)
		host_resume(&r, s.host_spec); /* this is the executed host: it runs the tasks, never returns */
	rc = set_up(argc, argv, &r, &s, &host);
	if (rc)
		return rc;
	supervise(&r, &s, host, &o);
	rc = report(&r, &o);
	free(r.cpus);
	return rc;
}
