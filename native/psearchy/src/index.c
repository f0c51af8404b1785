/*
 * index.c - pedsort's job: workers (threads or processes), each pinned to its CPU, pull files from a
 * shared queue (phase 1), then merge their own runs (phase 2). The index is built under
 * OUT.partial-PID and renamed to OUT only when every worker succeeded, so a failure (a full disk, an
 * unreadable file, Ctrl-C) leaves nothing that looks like a result; the caller returns only once every
 * worker has ended.
 */
#include "internal.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { RUNNING, FAILED, INTERRUPTED };

#define OUT_BUFFER (1 << 20)	/* stdio buffer of each run and postings file being written */
#define RUN_BUFFER (1 << 16)	/* ... and of each run being merged */

struct wstat {
	double phase1_s, phase2_s;
	uint64_t files, bytes, words, flushes, runs_merged, entries, dbs, postings_bytes;
	unsigned passes;
	int failed;
	char err[PS_ERR_LEN];
};

/* Shared by the workers, and with processes mapped MAP_SHARED before the fork. */
struct shared {
	_Atomic uint64_t next;	/* the queue: the next file to take */
	_Atomic int state;
	struct wstat w[];
};

/* Where ps_interrupt, called from a signal handler, finds the running job; an interrupt that comes
 * before the job has its state is kept pending for it. */
static struct shared *_Atomic interrupt_target;
static atomic_int interrupt_pending;

void ps_interrupt(void)
{
	atomic_store(&interrupt_pending, 1);
	struct shared *sh = atomic_load(&interrupt_target);
	int running = RUNNING;
	if (sh)
		atomic_compare_exchange_strong(&sh->state, &running, INTERRUPTED);
}

struct worker {
	unsigned id;
	int cpu;
	const struct ps_corpus *c;
	const struct ps_options *opt;
	struct shared *sh;
	const char *tmp;
	unsigned fanin;
	char *outbuf;
	int started;
	pthread_t thread;
	pid_t pid;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((format(printf, 2, 3))) static int worker_fail(struct worker *w, const char *fmt, ...)
{
	struct wstat *st = &w->sh->w[w->id];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->err, sizeof(st->err), fmt, ap);
	va_end(ap);
	st->failed = 1;
	int running = RUNNING;
	atomic_compare_exchange_strong(&w->sh->state, &running, FAILED);
	return -1;
}

static int stopped(void *arg)
{
	const struct worker *w = arg;
	return atomic_load_explicit(&w->sh->state, memory_order_relaxed) != RUNNING;
}

static void run_name(const struct worker *w, unsigned pass, unsigned n, char *buf)
{
	snprintf(buf, PATH_MAX, "%s/w%u/run-%u-%u", w->tmp, w->id, pass, n);
}

static int flush_table(struct worker *w, struct ps_table *t, unsigned *nruns)
{
	char name[PATH_MAX];
	run_name(w, 0, *nruns, name);
	FILE *f = fopen(name, "w");
	if (!f)
		return worker_fail(w, "creating %s: %s", name, strerror(errno));
	setvbuf(f, w->outbuf, _IOFBF, OUT_BUFFER);
	int e = ps_table_flush(t, f);
	if (fclose(f) && !e)
		e = errno;
	if (e)
		return worker_fail(w, "writing %s: %s", name, strerror(e));
	++*nruns;
	w->sh->w[w->id].flushes++;
	return 0;
}

/* Reads one file through a stdio stream, a character at a time as the original did: in a threaded
 * process every getc takes the stream's lock, one of the costs the paper's Procs variant avoids. */
static int index_file(struct worker *w, struct ps_table *t, uint32_t id, unsigned *nruns)
{
	char path[PATH_MAX], word[PS_MAX_WORD];
	if (snprintf(path, sizeof(path), "%s/%s", w->c->root, w->c->paths[id]) >= (int)sizeof(path))
		return worker_fail(w, "%s/%s: %s", w->c->root, w->c->paths[id], strerror(ENAMETOOLONG));
	FILE *f = fopen(path, "r");
	if (!f)
		return worker_fail(w, "cannot read %s: %s", path, strerror(errno));
	uint32_t h = PS_HASH_INIT, pos = 0, start = 0;
	uint64_t words = 0;	/* counted here, not in the shared statistics on every word */
	unsigned len = 0;
	for (int ch;; pos++) {
		ch = getc(f);
		unsigned char lc = ch == EOF ? 0 : ps_wordchar[ch];
		if (lc) {
			if (!len)
				start = pos;
			if (len < PS_MAX_WORD) {
				word[len] = (char)lc;
				h = ps_hash_step(h, lc);
			}
			len++;
		} else if (len) {
			if (len <= PS_MAX_WORD) {
				if (ps_table_add(t, word, len, h, id, start)) {
					if (flush_table(w, t, nruns)) {
						fclose(f);
						return -1;
					}
					ps_table_add(t, word, len, h, id, start);
				}
				words++;
			}
			len = 0;
			h = PS_HASH_INIT;
		}
		if (ch == EOF)
			break;
	}
	int bad = ferror(f);
	int e = errno;
	fclose(f);
	if (bad)
		return worker_fail(w, "reading %s: %s", path, strerror(e));
	struct wstat *st = &w->sh->w[w->id];
	st->files++;
	st->bytes += pos;
	st->words += words;
	return 0;
}

static void close_all(FILE **f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (f[i])
			fclose(f[i]);
}

/* Merges runs [first, first+k) of a pass into out_name; the final merge (dbs set) also writes the DBs. */
static int merge_group(struct worker *w, unsigned pass, unsigned first, unsigned k, const char *out_name,
		       struct ps_dbs *dbs)
{
	struct wstat *st = &w->sh->w[w->id];
	FILE **in = calloc(k ? k : 1, sizeof(*in));
	char **names = calloc(k ? k : 1, sizeof(*names));
	FILE *out = NULL;
	char err[PS_ERR_LEN];
	int rc = -1;
	if (!in || !names) {
		worker_fail(w, "merging into %s: %s", out_name, strerror(ENOMEM));
		goto out;
	}
	for (unsigned i = 0; i < k; i++) {
		char name[PATH_MAX];
		run_name(w, pass, first + i, name);
		if (!(names[i] = strdup(name))) {
			worker_fail(w, "merging into %s: %s", out_name, strerror(ENOMEM));
			goto out;
		}
		if (!(in[i] = fopen(name, "r"))) {
			worker_fail(w, "opening %s: %s", name, strerror(errno));
			goto out;
		}
		setvbuf(in[i], NULL, _IOFBF, RUN_BUFFER);
	}
	if (!(out = fopen(out_name, "w"))) {
		worker_fail(w, "creating %s: %s", out_name, strerror(errno));
		goto out;
	}
	setvbuf(out, w->outbuf, _IOFBF, OUT_BUFFER);
	uint64_t offset = 0;
	if (dbs) {
		fwrite(PS_POSTINGS_MAGIC, 1, PS_POSTINGS_HEADER, out);
		offset = PS_POSTINGS_HEADER;
	}
	struct ps_merge_stats ms;
	if (ps_merge(in, (const char *const *)names, k, out, out_name, offset, dbs, stopped, w, &ms, err) ||
	    (dbs && ps_dbs_close(dbs, err))) {
		if (!stopped(w))
			worker_fail(w, "%s", err);
		goto out;
	}
	int e = fclose(out) ? errno : 0;
	out = NULL;
	if (e) {
		worker_fail(w, "writing %s: %s", out_name, strerror(e));
		goto out;
	}
	for (unsigned i = 0; i < k; i++)
		unlink(names[i]);
	st->runs_merged += k;
	if (dbs)
		st->postings_bytes = offset + ms.bytes;
	rc = 0;
out:
	if (dbs)
		ps_dbs_close(dbs, err);
	if (out)
		fclose(out);
	if (in)
		close_all(in, k);
	for (unsigned i = 0; names && i < k; i++)
		free(names[i]);
	free(names);
	free(in);
	return rc;
}

/* Phase 2: merges in passes of at most `fanin` runs (open files are limited), the last into the
 * postings file and its DBs. */
static int merge_runs(struct worker *w, unsigned nruns)
{
	struct wstat *st = &w->sh->w[w->id];
	char name[PATH_MAX];
	unsigned pass = 0;
	while (nruns > w->fanin) {
		unsigned next = 0;
		for (unsigned first = 0; first < nruns; first += w->fanin) {
			unsigned k = nruns - first < w->fanin ? nruns - first : w->fanin;
			run_name(w, pass + 1, next++, name);
			if (merge_group(w, pass, first, k, name, NULL))
				return -1;
		}
		pass++;
		nruns = next;
	}
	snprintf(name, sizeof(name), "%s/w%u", w->tmp, w->id);
	struct ps_dbs dbs = { .dir = name, .dblim = w->opt->dblim };
	char postings[PATH_MAX];
	snprintf(postings, sizeof(postings), "%s/postings", name);
	if (merge_group(w, pass, 0, nruns, postings, &dbs))
		return -1;
	st->passes = pass + 1;
	st->entries = dbs.entries;
	st->dbs = dbs.ndbs;
	return 0;
}

static void worker_main(struct worker *w)
{
	struct wstat *st = &w->sh->w[w->id];
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		worker_fail(w, "cannot run on CPU %d: %s", w->cpu, strerror(errno));
		return;
	}
	double t0 = now_s();
	struct ps_table *t = ps_table_new(w->opt->mem_bytes);
	w->outbuf = malloc(OUT_BUFFER);
	unsigned nruns = 0;
	if (!t || !w->outbuf) {
		worker_fail(w, "a %zu-byte table: %s", w->opt->mem_bytes, strerror(ENOMEM));
		goto out;
	}
	while (!stopped(w)) {
		uint64_t i = atomic_fetch_add_explicit(&w->sh->next, 1, memory_order_relaxed);
		if (i >= w->c->n)
			break;
		if (index_file(w, t, (uint32_t)i, &nruns))
			goto out;
	}
	if (stopped(w) || (!ps_table_empty(t) && flush_table(w, t, &nruns)))
		goto out;
	ps_table_free(t);
	t = NULL;
	double t1 = now_s();
	st->phase1_s = t1 - t0;
	if (merge_runs(w, nruns) == 0)
		st->phase2_s = now_s() - t1;
out:
	ps_table_free(t);
	free(w->outbuf);
	w->outbuf = NULL;
}

static void *worker_thread(void *arg)
{
	worker_main(arg);
	return NULL;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int write_files_db(const struct ps_corpus *c, const char *tmp, char *err)
{
	char path[PATH_MAX];
	DB *db = NULL;
	snprintf(path, sizeof(path), "%s/files.db", tmp);
	int e = ps_db_open(&db, path, 1);
	for (size_t i = 0; !e && i < c->n; i++) {
		uint32_t id = (uint32_t)i;
		DBT key = { .data = &id, .size = sizeof(id) };
		DBT val = { .data = c->paths[i], .size = (uint32_t)strlen(c->paths[i]) };
		e = db->put(db, NULL, &key, &val, 0);
	}
	if (db) {
		int ce = db->close(db, 0);
		e = e ? e : ce;
	}
	if (e)
		snprintf(err, PS_ERR_LEN, "writing %s: %s", path, db_strerror(e));
	return e ? -1 : 0;
}

static int write_manifest(const struct ps_corpus *c, const struct ps_options *opt, const struct shared *sh,
			  const char *tmp, char *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/manifest", tmp);
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, PS_ERR_LEN, "creating %s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f, "mosbench-psearchy index 1\ncorpus %s\nfiles %zu\nworkers %u\n", c->root, c->n, opt->ncpus);
	for (unsigned k = 0; k < opt->ncpus; k++)
		fprintf(f, "worker %u dbs %" PRIu64 " entries %" PRIu64 "\n", k, sh->w[k].dbs, sh->w[k].entries);
	int e = ferror(f) ? errno : 0;
	if (fclose(f) && !e)
		e = errno;
	if (e)
		snprintf(err, PS_ERR_LEN, "writing %s: %s", path, strerror(e));
	return e ? -1 : 0;
}

/* Runs merged at once: what the open-file limit (which the program may raise) leaves each worker. */
static unsigned merge_fanin(const struct ps_options *opt)
{
	struct rlimit lim;
	if (getrlimit(RLIMIT_NOFILE, &lim))
		return 16;
	rlim_t spare = lim.rlim_cur > 64 ? lim.rlim_cur - 64 : 4;
	if (opt->mode == PS_THREADS)
		spare /= opt->ncpus;
	return spare < 2 ? 2 : spare > 512 ? 512 : (unsigned)spare;
}

static int start_workers(struct worker *ws, const struct ps_options *opt, struct shared *sh, char *err)
{
	for (unsigned k = 0; k < opt->ncpus; k++) {
		struct worker *w = &ws[k];
		if (opt->mode == PS_THREADS) {
			int e = pthread_create(&w->thread, NULL, worker_thread, w);
			if (e) {
				snprintf(err, PS_ERR_LEN, "starting worker %u: %s", k, strerror(e));
				return -1;
			}
			w->started = 1;
		} else {
			pid_t parent = getpid();
			w->pid = fork();
			if (w->pid < 0) {
				snprintf(err, PS_ERR_LEN, "starting worker %u: %s", k, strerror(errno));
				return -1;
			}
			if (w->pid == 0) {
				/* A worker never outlives the job, even if the parent is killed outright. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != parent)
					_exit(1);
				worker_main(w);
				_exit(sh->w[k].failed ? 1 : 0);
			}
			w->started = 1;
		}
	}
	return 0;
}

static void wait_workers(struct worker *ws, unsigned n, enum ps_mode mode, struct shared *sh, char *err)
{
	for (unsigned k = 0; k < n; k++) {
		if (!ws[k].started)
			continue;
		if (mode == PS_THREADS) {
			pthread_join(ws[k].thread, NULL);
			continue;
		}
		int status;
		while (waitpid(ws[k].pid, &status, 0) < 0 && errno == EINTR)
			;
		if (WIFSIGNALED(status) && !sh->w[k].failed) {
			int running = RUNNING;
			atomic_compare_exchange_strong(&sh->state, &running, FAILED);
			if (!*err)
				snprintf(err, PS_ERR_LEN, "worker %u (pid %d) was killed by signal %d", k, (int)ws[k].pid,
					 WTERMSIG(status));
		}
	}
}

static uint64_t faults(int who, int major)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (uint64_t)(major ? ru.ru_majflt : ru.ru_minflt);
}

int ps_index(const struct ps_corpus *c, const struct ps_options *opt, struct ps_stats *st, char *err)
{
	double t0 = now_s();
	uint64_t minor0 = faults(RUSAGE_SELF, 0) + faults(RUSAGE_CHILDREN, 0);
	uint64_t major0 = faults(RUSAGE_SELF, 1) + faults(RUSAGE_CHILDREN, 1);
	char tmp[PATH_MAX];
	struct stat sb;
	memset(st, 0, sizeof(*st));
	*err = '\0';
	if (!opt->ncpus || !opt->dblim || opt->mem_bytes < (64 << 10)) {
		snprintf(err, PS_ERR_LEN, "need at least one CPU, a dblim above 0 and 64 KB of table memory");
		return -1;
	}
	if (!lstat(opt->out, &sb)) {
		snprintf(err, PS_ERR_LEN, "%s already exists: remove it, or name a new index", opt->out);
		return -1;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.partial-%d", opt->out, (int)getpid()) >= (int)sizeof(tmp) - 64) {
		snprintf(err, PS_ERR_LEN, "%s: %s", opt->out, strerror(ENAMETOOLONG));
		return -1;
	}
	if (mkdir(tmp, 0755)) {
		snprintf(err, PS_ERR_LEN, "creating %s: %s", tmp, strerror(errno));
		return -1;
	}
	size_t shared_size = sizeof(struct shared) + opt->ncpus * sizeof(struct wstat);
	struct shared *sh = mmap(NULL, shared_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct worker *ws = calloc(opt->ncpus, sizeof(*ws));
	if (sh == MAP_FAILED || !ws) {
		snprintf(err, PS_ERR_LEN, "%s", strerror(ENOMEM));
		free(ws);
		if (sh != MAP_FAILED)
			munmap(sh, shared_size);
		remove_tree(tmp);
		return -1;
	}
	unsigned fanin = merge_fanin(opt);
	for (unsigned k = 0; k < opt->ncpus; k++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/w%u", tmp, k);
		if (mkdir(dir, 0755) && !*err)
			snprintf(err, PS_ERR_LEN, "creating %s: %s", dir, strerror(errno));
		ws[k] = (struct worker){ .id = k, .cpu = opt->cpus[k], .c = c, .opt = opt, .sh = sh, .tmp = tmp,
					 .fanin = fanin };
	}
	atomic_store(&interrupt_target, sh);
	if (atomic_load(&interrupt_pending))
		atomic_store(&sh->state, INTERRUPTED);
	else if (*err || start_workers(ws, opt, sh, err))
		atomic_store(&sh->state, FAILED);
	/* The file table is the parent's work, done while the workers index. */
	else if (write_files_db(c, tmp, err))
		atomic_store(&sh->state, FAILED);
	wait_workers(ws, opt->ncpus, opt->mode, sh, err);
	atomic_store(&interrupt_target, NULL);

	int state = atomic_load(&sh->state);
	if (state == RUNNING && write_manifest(c, opt, sh, tmp, err))
		state = FAILED;
	if (state == RUNNING && rename(tmp, opt->out)) {
		snprintf(err, PS_ERR_LEN, "renaming %s to %s: %s", tmp, opt->out, strerror(errno));
		state = FAILED;
	}
	if (state != RUNNING) {
		for (unsigned k = 0; k < opt->ncpus; k++)
			if (sh->w[k].failed) {
				snprintf(err, PS_ERR_LEN, "%s", sh->w[k].err);
				break;
			}
		if (state == INTERRUPTED)
			snprintf(err, PS_ERR_LEN, "interrupted; no index written");
		remove_tree(tmp);
		munmap(sh, shared_size);
		free(ws);
		return -1;
	}
	for (unsigned k = 0; k < opt->ncpus; k++) {
		const struct wstat *w = &sh->w[k];
		st->files += w->files;
		st->bytes += w->bytes;
		st->words += w->words;
		st->entries += w->entries;
		st->flushes += w->flushes;
		st->runs_merged += w->runs_merged;
		st->dbs += w->dbs;
		st->postings_bytes += w->postings_bytes;
		if (w->passes > st->merge_passes)
			st->merge_passes = w->passes;
		if (w->phase1_s > st->phase1_s)
			st->phase1_s = w->phase1_s;
		if (w->phase2_s > st->phase2_s)
			st->phase2_s = w->phase2_s;
	}
	st->minor_faults = faults(RUSAGE_SELF, 0) + faults(RUSAGE_CHILDREN, 0) - minor0;
	st->major_faults = faults(RUSAGE_SELF, 1) + faults(RUSAGE_CHILDREN, 1) - major0;
	munmap(sh, shared_size);
	free(ws);
	st->job_s = now_s() - t0;
	return 0;
}
