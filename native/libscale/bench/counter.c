/* Reference counting: one get and one put per iteration, as a path lookup takes and drops a dentry. */
#include "bench.h"
#include "scale/counter.h"

#include <errno.h>

struct counters {
	struct shared_counter shared;
	struct sloppy_counter sloppy;
	struct pcpu_counter pcpu;
};

static int prepare(void *shared, const char *workdir, unsigned ntasks)
{
	struct counters *c = shared;
	(void)workdir;
	(void)ntasks;
	atomic_init(&c->shared.value, 1);
	if (sloppy_counter_init(&c->sloppy, 1, micro_param("threshold", 16)) ||
	    pcpu_counter_init(&c->pcpu, 1, micro_param("batch", 0)))
		return ENOMEM;
	return 0;
}

static void run_shared(struct micro_task *t)
{
	struct counters *c = t->shared;
	for (;;) {
		shared_counter_add(&c->shared, 1);
		shared_counter_add(&c->shared, -1);
		micro_count(t);
	}
}

static void run_sloppy(struct micro_task *t)
{
	struct counters *c = t->shared;
	for (;;) {
		sloppy_counter_inc(&c->sloppy, 1);
		sloppy_counter_dec(&c->sloppy, 1);
		micro_count(t);
	}
}

static void run_pcpu(struct micro_task *t)
{
	struct counters *c = t->shared;
	for (;;) {
		pcpu_counter_add(&c->pcpu, 1);
		pcpu_counter_add(&c->pcpu, -1);
		micro_count(t);
	}
}

MICRO_TEST_NAMED(counter_stock, "counter/stock", .description = "get+put on one shared atomic counter",
		 .shared_size = sizeof(struct counters), .threads_only = true, .prepare = prepare,
		 .run = run_shared);
MICRO_TEST_NAMED(counter_scalable, "counter/scalable",
		 .description = "get+put on a sloppy counter (local spare references)",
		 .shared_size = sizeof(struct counters), .threads_only = true, .prepare = prepare,
		 .run = run_sloppy);
MICRO_TEST_NAMED(counter_percpu, "counter/percpu",
		 .description = "add +1/-1 on a percpu_counter-style approximate counter",
		 .shared_size = sizeof(struct counters), .threads_only = true, .prepare = prepare,
		 .run = run_pcpu);
