/*
 * mosbench-psearchy: pedsort, the Psearchy indexer, and its query.
 *
 *   mosbench-psearchy index --corpus DIR --out DIR --cpus LIST [--mode threads|procs] [--mem SIZE]
 *                           [--dblim N] [--result FILE] [--wait-signal]
 *   mosbench-psearchy query --index DIR [WORD...]      (no WORD: one a line from stdin)
 *
 * index walks the corpus first (the work queue, largest file first); with --wait-signal it then says
 * "ready" and starts the job on SIGUSR1, so the harness times the job alone. query prints
 * "WORD<TAB>PATH<TAB>OFFSET" for every place a word occurs, by path then offset, and exits 0 if any
 * word was found, 1 if none, 2 on an error (as grep does).
 */
#include "psearchy/psearchy.h"

#include "cpulist.h"
#include "job.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: mosbench-psearchy index --corpus DIR --out DIR --cpus LIST [--mode threads|procs]\n"
		   "                               [--mem SIZE] [--dblim N] [--result FILE] [--wait-signal]\n"
		   "       mosbench-psearchy query --index DIR [WORD...]\n");
}

/* "48M", "512K", "1G" or bytes. */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	}
	if (errno || end == s || *end || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)v << shift;
	return 0;
}

/* Both commands hold many files open: merging runs (fewer passes with more at once), and querying an
 * index with a DB per worker and shard. */
static void raise_nofile(void)
{
	struct rlimit lim;
	if (!getrlimit(RLIMIT_NOFILE, &lim)) {
		lim.rlim_cur = lim.rlim_max;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	ps_interrupt();
}

static int fill_line(FILE *f, const void *arg)
{
	return fputs(arg, f) < 0 ? errno : 0;
}

static int cmd_index(int argc, char **argv)
{
	const char *corpus = NULL, *cpus = NULL, *result = NULL;
	struct ps_options opt = { .mode = PS_THREADS, .mem_bytes = 48 << 20, .dblim = 200000 };
	int wait_signal = 0;
	static const struct option opts[] = {
		{ "corpus", required_argument, NULL, 'C' }, { "out", required_argument, NULL, 'o' },
		{ "cpus", required_argument, NULL, 'c' },   { "mode", required_argument, NULL, 'm' },
		{ "mem", required_argument, NULL, 'M' },    { "dblim", required_argument, NULL, 'd' },
		{ "result", required_argument, NULL, 'r' }, { "wait-signal", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },	    { 0 }
	};
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 'C': corpus = optarg; break;
		case 'o': opt.out = optarg; break;
		case 'c': cpus = optarg; break;
		case 'm':
			if (!strcmp(optarg, "procs"))
				opt.mode = PS_PROCS;
			else if (strcmp(optarg, "threads")) {
				fprintf(stderr, "mosbench-psearchy: --mode must be threads or procs\n");
				return 2;
			}
			break;
		case 'M':
			if (parse_size(optarg, &opt.mem_bytes)) {
				fprintf(stderr, "mosbench-psearchy: bad --mem '%s' (bytes, or with K, M or G)\n", optarg);
				return 2;
			}
			break;
		case 'd': {
			uint64_t n;
			if (job_parse_u64(optarg, UINT_MAX, &n) || n == 0) {
				fprintf(stderr, "mosbench-psearchy: --dblim needs a whole number from 1, not '%s'\n", optarg);
				return 2;
			}
			opt.dblim = (unsigned)n;
			break;
		}
		case 'r': result = optarg; break;
		case 'w': wait_signal = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!corpus || !opt.out || !cpus || optind != argc) {
		usage(stderr);
		return 2;
	}
	int *cpu_list;
	if (cpulist_parse(cpus, &cpu_list, &opt.ncpus)) {
		fprintf(stderr, "mosbench-psearchy: bad CPU list '%s'\n", cpus);
		return 2;
	}
	opt.cpus = cpu_list;

	char err[PS_ERR_LEN];
	struct ps_corpus c;
	if (ps_corpus_load(corpus, &c, err)) {
		fprintf(stderr, "mosbench-psearchy: %s\n", err);
		free(cpu_list);
		return 1;
	}
	if (wait_signal) {
		char line[128];
		snprintf(line, sizeof(line), "ready %zu files %" PRIu64 " bytes", c.n, c.bytes);
		job_wait_start(line);
	}
	/* Until now a signal's default action was right: nothing had been written. From here the job
	 * must stop its workers and remove its partial index first. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	raise_nofile();
	struct ps_stats st;
	int rc = ps_index(&c, &opt, &st, err);
	if (rc) {
		fprintf(stderr, "mosbench-psearchy: %s\n", err);
		ps_corpus_free(&c);
		free(cpu_list);
		return 1;
	}
	char line[1024];
	snprintf(line, sizeof(line),
		 "{\"mode\": \"%s\", \"cpus\": %u, \"job_s\": %.6f, \"phase1_s\": %.6f, \"phase2_s\": %.6f, "
		 "\"files\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"words\": %" PRIu64 ", \"entries\": %" PRIu64 ", "
		 "\"flushes\": %" PRIu64 ", \"runs_merged\": %" PRIu64 ", \"merge_passes\": %u, \"dbs\": %" PRIu64 ", "
		 "\"postings_bytes\": %" PRIu64 ", \"minor_faults\": %" PRIu64 ", \"major_faults\": %" PRIu64 ", "
		 "\"mem_bytes\": %zu, \"dblim\": %u}\n",
		 opt.mode == PS_PROCS ? "procs" : "threads", opt.ncpus, st.job_s, st.phase1_s, st.phase2_s, st.files,
		 st.bytes, st.words, st.entries, st.flushes, st.runs_merged, st.merge_passes, st.dbs,
		 st.postings_bytes, st.minor_faults, st.major_faults, opt.mem_bytes, opt.dblim);
	fputs(line, stdout);
	fflush(stdout);
	ps_corpus_free(&c);
	free(cpu_list);
	if (result && (rc = job_write_atomically(result, fill_line, line))) {
		fprintf(stderr, "mosbench-psearchy: %s: %s\n", result, strerror(rc));
		return 1;
	}
	return 0;
}

static int query_one(struct ps_index *ix, const char *word, int *found)
{
	char err[PS_ERR_LEN];
	struct ps_hit *hits;
	size_t n;
	if (ps_lookup(ix, word, &hits, &n, err)) {
		fprintf(stderr, "mosbench-psearchy: %s\n", err);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		printf("%s\t%s\t%" PRIu32 "\n", word, hits[i].path, hits[i].off);
	*found |= n > 0;
	ps_hits_free(hits, n);
	return 0;
}

static int cmd_query(int argc, char **argv)
{
	const char *dir = NULL;
	static const struct option opts[] = { { "index", required_argument, NULL, 'i' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 'i': dir = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!dir) {
		usage(stderr);
		return 2;
	}
	raise_nofile();
	char err[PS_ERR_LEN];
	struct ps_index *ix;
	if (ps_open(dir, &ix, err)) {
		fprintf(stderr, "mosbench-psearchy: %s\n", err);
		return 2;
	}
	int found = 0, rc = 0;
	if (optind < argc) {
		for (int i = optind; i < argc && !rc; i++)
			rc = query_one(ix, argv[i], &found);
	} else {
		char *line = NULL;
		size_t cap = 0;
		for (ssize_t len; !rc && (len = getline(&line, &cap, stdin)) > 0;) {
			line[strcspn(line, "\r\n")] = '\0';
			rc = query_one(ix, line, &found);
		}
		free(line);
	}
	ps_close(ix);
	if (fflush(stdout)) {
		fprintf(stderr, "mosbench-psearchy: writing results: %s\n", strerror(errno));
		return 2;
	}
	return rc ? 2 : found ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "index"))
		return cmd_index(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "query"))
		return cmd_query(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
