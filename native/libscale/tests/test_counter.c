/* Counters: the sloppy counter's invariant between phases of heavy concurrent use with migrations. */
#include "scale/counter.h"
#include "scale/falseshare.h"
#include "stress.h"

#define HOLD_MAX 64

struct holder {
	long held;
	long ops;
};

static struct sloppy_counter sloppy;
static struct pcpu_counter pcpu;
static struct shared_counter shared;

static void sloppy_body(struct stress_worker *w)
{
	struct holder *h = (struct holder *)w->arg + w->id;
	while (stress_running(w)) {
		uint64_t r = stress_rand(w);
		long v = 1 + (long)(r % 4);
		if ((r >> 8) % 2 && h->held + v <= HOLD_MAX) {
			sloppy_counter_inc(&sloppy, v);
			h->held += v;
		} else if (h->held >= v) {
			sloppy_counter_dec(&sloppy, v);
			h->held -= v;
		}
		if ((r >> 16) % 997 == 0)
			stress_migrate(w);
		h->ops++;
	}
}

static void pcpu_body(struct stress_worker *w)
{
	struct holder *h = (struct holder *)w->arg + w->id;
	while (stress_running(w)) {
		uint64_t r = stress_rand(w);
		long v = (long)(r % 7) - 3;
		pcpu_counter_add(&pcpu, v);
		shared_counter_add(&shared, v);
		h->held += v;
		if ((r >> 16) % 997 == 0)
			stress_migrate(w);
	}
}

static void check_sloppy(void)
{
	unsigned n = stress_threads();
	struct holder *h = calloc(n, sizeof(*h));
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(h && w, "out of memory");
	CHECK(sloppy_counter_init(&sloppy, 0, 8) == 0, "init");
	long ops = 0;
	for (int phase = 0; phase < 4; phase++) {
		stress_run(n, stress_seconds() / 4, sloppy_body, h, w);
		long held = 0;
		for (unsigned i = 0; i < n; i++)
			held += h[i].held;
		/* The paper's invariant: central == spares + references in use. */
		CHECK(sloppy_counter_central(&sloppy) == sloppy_counter_spares(&sloppy) + held,
		      "phase %d: central %ld, spares %ld, held %ld", phase, sloppy_counter_central(&sloppy),
		      sloppy_counter_spares(&sloppy), held);
		CHECK(sloppy_counter_in_use(&sloppy) == held, "in_use %ld != held %ld",
		      sloppy_counter_in_use(&sloppy), held);
		for (unsigned i = 0; i < sloppy.nr_slots; i++) {
			long s = atomic_load(&sloppy.slots[i].spare);
			/* A slot can exceed the threshold only by what one racing decrement added. */
			CHECK(s >= 0 && s <= sloppy.threshold + 4 * (long)n, "slot %u holds %ld spares", i, s);
		}
	}
	for (unsigned i = 0; i < n; i++) {
		sloppy_counter_dec(&sloppy, h[i].held);
		ops += h[i].ops;
	}
	CHECK(sloppy_counter_reconcile(&sloppy) == 0, "references left after all were put");
	CHECK(sloppy_counter_spares(&sloppy) == 0, "reconcile left spares");
	CHECK(ops > 1000, "only %ld operations ran", ops);
	sloppy_counter_destroy(&sloppy);
	free(h);
	free(w);
	STRESS_PASS("sloppy_counter invariant, reconcile, threshold");
}

static void check_sloppy_local(void)
{
	/* On one CPU, references cycle through the local spares without touching central. */
	CHECK(sloppy_counter_init(&sloppy, 0, 4) == 0, "init");
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((unsigned)sched_getcpu(), &set);
	sched_setaffinity(0, sizeof(set), &set);
	sloppy_counter_inc(&sloppy, 1);
	CHECK(sloppy_counter_central(&sloppy) == 1, "first reference comes from central");
	sloppy_counter_dec(&sloppy, 1);
	CHECK(sloppy_counter_central(&sloppy) == 1 && sloppy_counter_spares(&sloppy) == 1, "kept as spare");
	for (int i = 0; i < 1000; i++) {
		sloppy_counter_inc(&sloppy, 1);
		sloppy_counter_dec(&sloppy, 1);
	}
	CHECK(sloppy_counter_central(&sloppy) == 1, "get/put cycles touched central");
	sloppy_counter_dec(&sloppy, 9);	/* above the threshold: spares go back to central */
	CHECK(sloppy_counter_spares(&sloppy) <= 4, "spares above threshold were kept: %ld",
	      sloppy_counter_spares(&sloppy));
	CHECK(sloppy_counter_in_use(&sloppy) == -9, "in_use after an unmatched put");
	sloppy_counter_destroy(&sloppy);
	STRESS_PASS("sloppy_counter local spares");
}

static void check_pcpu(void)
{
	unsigned n = stress_threads();
	struct holder *h = calloc(n, sizeof(*h));
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(h && w, "out of memory");
	CHECK(pcpu_counter_init(&pcpu, 5, 16) == 0, "init");
	atomic_init(&shared.value, 5);
	stress_run(n, stress_seconds(), pcpu_body, h, w);
	long total = 5;
	for (unsigned i = 0; i < n; i++)
		total += h[i].held;
	CHECK(pcpu_counter_sum(&pcpu) == total, "sum %ld != %ld", pcpu_counter_sum(&pcpu), total);
	CHECK(shared_counter_read(&shared) == total, "shared %ld != %ld", shared_counter_read(&shared), total);
	long err = pcpu_counter_read(&pcpu) - total;
	CHECK(err > -16L * pcpu.nr_slots && err < 16L * pcpu.nr_slots, "approximate read off by %ld", err);
	pcpu_counter_destroy(&pcpu);
	free(h);
	free(w);
	STRESS_PASS("pcpu_counter exact sum, bounded error; shared_counter");
}

static struct fs_packed packed[16];
static struct fs_split_ro split_ro = { .flags = 3, .ops = 4 };
static struct fs_split_hot split_hot[64];

static void falseshare_body(struct stress_worker *w)
{
	long seen = 0, uses = 0;
	while (stress_running(w)) {
		seen += fs_packed_use(&packed[w->id / FS_PACKED_WRITERS], w->id % FS_PACKED_WRITERS);
		seen += fs_split_use(&split_ro, &split_hot[w->id]);
		uses++;
	}
	/* Each use reads flags + ops: 1 + 2 packed beside the hot counters, 3 + 4 on their own line. */
	CHECK(seen == uses * (1 + 2 + 3 + 4), "read-mostly fields read as %ld over %ld uses", seen, uses);
}

static void check_falseshare(void)
{
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w && n <= 64, "threads");
	for (unsigned i = 0; i < 16; i++)
		packed[i].flags = 1, packed[i].ops = 2;
	stress_run(n, stress_seconds() / 2, falseshare_body, NULL, w);
	for (unsigned i = 0; i < n; i++)
		CHECK(atomic_load(&packed[i / FS_PACKED_WRITERS].hot[i % FS_PACKED_WRITERS]) ==
			      atomic_load(&split_hot[i].hot), "writer %u: the two layouts counted differently", i);
	free(w);
	STRESS_PASS("false-sharing layouts count alike");
}

int main(void)
{
	check_sloppy_local();
	check_sloppy();
	check_pcpu();
	check_falseshare();
	return 0;
}
