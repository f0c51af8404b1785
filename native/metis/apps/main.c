/*
 * mosbench-metis: runs one Metis job (word count or inverted index) on a list of CPUs, or generates
 * input for it.
 *
 *   mosbench-metis --app invindex --input FILE --cpus LIST [--pages 4k|2m] [--partitions N]
 *                  [--output FILE] [--result FILE] [--wait-signal] [--stream]
 *   mosbench-metis --generate FILE --size-mb N [--seed S] [--vocab V]
 *
 * The input is read into memory before the job (the paper's Metis ran on 2 GB in memory). With
 * --wait-signal the program says "ready" on stdout once it is loaded and starts the job on SIGUSR1, so
 * the harness times the job alone. --stream first measures the CPUs' memory bandwidth with a STREAM
 * triad, the yardstick for the reduce phase. Results go to temporary files renamed into place only when
 * complete, so a failed job (a full disk included) leaves nothing that looks like a result.
 */
#include "metis/gen.h"
#include "metis/metis.h"
#include "metis/output.h"

#include "cpulist.h"
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fill_line(FILE *f, const void *arg)
{
	return fputs(arg, f) < 0 ? errno : 0;
}

static int fill_result(FILE *f, const void *arg)
{
	return metis_write_result(f, arg);
}

struct gen_args {
	uint64_t bytes, seed;
	uint32_t vocab;
};

static int fill_generated(FILE *f, const void *arg)
{
	const struct gen_args *g = arg;
	return metis_generate(f, g->bytes, g->seed, g->vocab);
}

struct triad {
	double *a, *b, *c;
	size_t n;
	int cpu;
	pthread_barrier_t *barrier;
	double seconds;
};

static void *triad_thread(void *p)
{
	struct triad *t = p;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	for (size_t i = 0; i < t->n; i++) {	/* first touch on our own CPU: our own NUMA node */
		t->a[i] = 0;
		t->b[i] = 1;
		t->c[i] = 2;
	}
	t->seconds = 1e9;
	for (int round = 0; round < 5; round++) {
		pthread_barrier_wait(t->barrier);
		double t0 = job_now_s();
		for (size_t i = 0; i < t->n; i++)
			t->a[i] = t->b[i] + 3.0 * t->c[i];
		double dt = job_now_s() - t0;
		if (dt < t->seconds)
			t->seconds = dt;
		pthread_barrier_wait(t->barrier);
	}
	return NULL;
}

/* STREAM triad on every CPU at once: bytes per second the memory system delivers to these CPUs. */
static double stream_triad(const int *cpus, unsigned n)
{
	const size_t per = 1 << 20;	/* doubles per array per thread: 24 MB a thread, past any cache */
	struct triad *t = calloc(n, sizeof(*t));
	pthread_t *th = calloc(n, sizeof(*th));
	double *mem = malloc(3 * per * n * sizeof(double));
	pthread_barrier_t barrier;
	double worst = 0;
	if (!t || !th || !mem)
		goto out;
	pthread_barrier_init(&barrier, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		t[i] = (struct triad){ .a = mem + 3 * per * i, .b = mem + 3 * per * i + per,
				       .c = mem + 3 * per * i + 2 * per, .n = per, .cpu = cpus[i], .barrier = &barrier };
		pthread_create(&th[i], NULL, triad_thread, &t[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		if (t[i].seconds > worst)
			worst = t[i].seconds;
	}
	pthread_barrier_destroy(&barrier);
out:
	free(mem);
	free(th);
	free(t);
	return worst > 0 ? 3.0 * sizeof(double) * per * n / worst : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mosbench-metis --app wordcount|invindex --input FILE --cpus LIST [--pages 4k|2m]\n"
		   "                      [--partitions N] [--output FILE] [--result FILE] [--wait-signal] [--stream]\n"
		   "       mosbench-metis --generate FILE --size-mb N [--seed S] [--vocab V]\n");
}

static int bad_number(const char *option, const char *text)
{
	fprintf(stderr, "mosbench-metis: %s needs a whole number in range, not '%s'\n", option, text);
	return 2;
}

int main(int argc, char **argv)
{
	const char *app_name = NULL, *input = NULL, *cpus = NULL, *output = NULL, *result = NULL, *generate = NULL;
	struct metis_job job = { .pages = METIS_PAGES_4K };
	struct gen_args gen = { .bytes = 0, .seed = 1, .vocab = 1000000 };
	int wait_signal = 0, stream = 0;
	static const struct option opts[] = {
		{ "app", required_argument, NULL, 'a' },      { "input", required_argument, NULL, 'i' },
		{ "cpus", required_argument, NULL, 'c' },     { "pages", required_argument, NULL, 'p' },
		{ "partitions", required_argument, NULL, 'P' }, { "output", required_argument, NULL, 'o' },
		{ "result", required_argument, NULL, 'r' },   { "wait-signal", no_argument, NULL, 'w' },
		{ "stream", no_argument, NULL, 's' },         { "generate", required_argument, NULL, 'g' },
		{ "size-mb", required_argument, NULL, 'S' },  { "seed", required_argument, NULL, 'e' },
		{ "vocab", required_argument, NULL, 'v' },    { "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	uint64_t n;
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 'a': app_name = optarg; break;
		case 'i': input = optarg; break;
		case 'c': cpus = optarg; break;
		case 'p':
			if (!strcmp(optarg, "2m"))
				job.pages = METIS_PAGES_2M;
			else if (strcmp(optarg, "4k")) {
				fprintf(stderr, "mosbench-metis: --pages must be 4k or 2m\n");
				return 2;
			}
			break;
		case 'P':
			if (job_parse_u64(optarg, UINT_MAX, &n))
				return bad_number("--partitions", optarg);
			job.partitions = (unsigned)n;
			break;
		case 'o': output = optarg; break;
		case 'r': result = optarg; break;
		case 'w': wait_signal = 1; break;
		case 's': stream = 1; break;
		case 'g': generate = optarg; break;
		case 'S':
			if (job_parse_u64(optarg, UINT64_MAX >> 20, &n))
				return bad_number("--size-mb", optarg);
			gen.bytes = n << 20;
			break;
		case 'e':
			if (job_parse_u64(optarg, UINT64_MAX, &gen.seed))
				return bad_number("--seed", optarg);
			break;
		case 'v':
			if (job_parse_u64(optarg, UINT32_MAX, &n))
				return bad_number("--vocab", optarg);
			gen.vocab = (uint32_t)n;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (generate) {
		if (!gen.bytes || !gen.vocab) {
			fprintf(stderr, "mosbench-metis: --generate needs --size-mb and a --vocab above 0\n");
			return 2;
		}
		int err = job_write_atomically(generate, fill_generated, &gen);
		if (err) {
			fprintf(stderr, "mosbench-metis: %s: %s\n", generate, strerror(err));
			return 1;
		}
		return 0;
	}
	if (!app_name || !input || !cpus) {
		usage(stderr);
		return 2;
	}
	job.app = !strcmp(app_name, "wordcount") ? &metis_wordcount : !strcmp(app_name, "invindex") ? &metis_invindex : NULL;
	if (!job.app) {
		fprintf(stderr, "mosbench-metis: unknown app '%s' (wordcount or invindex)\n", app_name);
		return 2;
	}
	int *cpu_list;
	if (cpulist_parse(cpus, &cpu_list, &job.ncpus)) {
		fprintf(stderr, "mosbench-metis: bad CPU list '%s'\n", cpus);
		return 2;
	}
	job.cpus = cpu_list;

	int fd = open(input, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "mosbench-metis: %s: %s\n", input, strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		fprintf(stderr, "mosbench-metis: %s: %s\n", input, S_ISREG(st.st_mode) ? "input is empty" : "not a file");
		return 1;
	}
	job.input_len = (size_t)st.st_size;
	job.input = mmap(NULL, job.input_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (job.input == MAP_FAILED) {
		fprintf(stderr, "mosbench-metis: %s: %s\n", input, strerror(errno));
		return 1;
	}
	double bandwidth = stream ? stream_triad(cpu_list, job.ncpus) : 0;

	if (wait_signal)
		job_wait_start("ready");
	struct metis_result r;
	struct metis_state *state = NULL;
	double t0 = job_now_s();
	int err = metis_run(&job, &r, &state);
	double job_s = job_now_s() - t0;
	if (err) {
		fprintf(stderr, "mosbench-metis: %s job failed: %s\n", job.app->name, strerror(err));
		metis_free(state);
		return 1;
	}
	if (output && (err = job_write_atomically(output, fill_result, &r))) {
		fprintf(stderr, "mosbench-metis: %s: %s\n", output, strerror(err));
		metis_free(state);
		return 1;
	}
	char line[1024];
	snprintf(line, sizeof(line),
		 "{\"app\": \"%s\", \"cpus\": %u, \"job_s\": %.6f, \"map_s\": %.6f, \"reduce_s\": %.6f, "
		 "\"merge_s\": %.6f, \"keys\": %zu, \"input_bytes\": %zu, \"reduce_bytes\": %" PRIu64 ", "
		 "\"minor_faults\": %" PRIu64 ", \"major_faults\": %" PRIu64 ", \"stream_triad_bytes_per_s\": %.0f, "
		 "\"pages\": \"%s\"}\n",
		 job.app->name, job.ncpus, job_s, r.map_s, r.reduce_s, r.merge_s, r.npairs, job.input_len,
		 r.reduce_bytes, r.minor_faults, r.major_faults, bandwidth,
		 job.pages == METIS_PAGES_4K ? "4k" : metis_arena_kind(metis_state_arena(state)));
	fputs(line, stdout);
	fflush(stdout);
	metis_free(state);
	if (result && (err = job_write_atomically(result, fill_line, line))) {
		fprintf(stderr, "mosbench-metis: %s: %s\n", result, strerror(err));
		return 1;
	}
	free(cpu_list);
	return 0;
}
