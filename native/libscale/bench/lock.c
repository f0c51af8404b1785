/*
 * Locks: each iteration acquires the lock, writes the data it protects and stays cs_ns, releases it,
 * then works par_ns outside it (the talk's experiment: about 2% of the time in the critical section
 * with the defaults). One acquisition is one unit of work.
 */
#include "bench.h"
#include "scale/lock.h"

#include <errno.h>
#include <stdlib.h>

#define PROTECTED_LINES 2

struct lock_bench {
	const struct scale_lock_ops *ops;
	void *lock;
	uint64_t cs_ticks, par_ticks;
	/* The protected data: written by every holder, so it moves between cores with the lock. */
	SCALE_ALIGNED long data[PROTECTED_LINES][SCALE_LINE / sizeof(long)];
};

static int prepare_kind(void *shared, const struct scale_lock_ops *ops)
{
	struct lock_bench *b = shared;
	double per_ns = bench_ticks_per_ns();
	b->ops = ops;
	b->cs_ticks = (uint64_t)(per_ns * (double)micro_param("cs_ns", 200));
	b->par_ticks = (uint64_t)(per_ns * (double)micro_param("par_ns", 9800));
	if (!(b->lock = bench_alloc(ops->size)))
		return ENOMEM;
	return ops->init(b->lock);
}

static int init(struct micro_task *t)
{
	struct lock_bench *b = t->shared;
	t->priv = NULL;
	if (b->ops->node_size && !(t->priv = bench_alloc(b->ops->node_size)))
		return ENOMEM;
	return 0;
}

static void run(struct micro_task *t)
{
	struct lock_bench *b = t->shared;
	for (;;) {
		b->ops->lock(b->lock, t->priv);
		for (int i = 0; i < PROTECTED_LINES; i++)
			b->data[i][0]++;
		bench_delay(b->cs_ticks);
		b->ops->unlock(b->lock, t->priv);
		bench_delay(b->par_ticks);
		micro_count(t);
	}
}

#define LOCK_BENCH(id, form, kind, what)                                                                 \
	static int prepare_##id(void *shared, const char *workdir, unsigned ntasks)                      \
	{                                                                                                \
		(void)workdir;                                                                           \
		(void)ntasks;                                                                            \
		return prepare_kind(shared, &kind);                                                      \
	}                                                                                                \
	MICRO_TEST_NAMED(id, "lock/" form, .description = what, .shared_size = sizeof(struct lock_bench), \
			 .threads_only = true, .prepare = prepare_##id, .init = init, .run = run)

LOCK_BENCH(lock_stock, "stock", scale_ticket_lock_ops, "ticket spinlock (Linux 2.6.35's spinlock)");
LOCK_BENCH(lock_scalable, "scalable", scale_mcs_lock_ops, "MCS queue lock");
LOCK_BENCH(lock_mutex, "mutex", scale_mutex_lock_ops, "pthread mutex (the application's baseline)");

/* Concurrency Kit's, for comparison (lock_ck.c). */
extern const struct scale_lock_ops bench_ck_ticket_ops, bench_ck_mcs_ops;
LOCK_BENCH(lock_ck_ticket, "ck-ticket", bench_ck_ticket_ops, "Concurrency Kit's ticket spinlock");
LOCK_BENCH(lock_ck_mcs, "ck-mcs", bench_ck_mcs_ops, "Concurrency Kit's MCS lock");
