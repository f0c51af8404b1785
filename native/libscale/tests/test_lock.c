/* Locks: mutual exclusion (an unprotected counter stays exact; TSan sees a race if it is not). */
#include "scale/lock.h"
#include "stress.h"

#include <string.h>

struct lock_test {
	const struct scale_lock_ops *ops;
	void *lock;
	long counter;			/* plain on purpose: only the lock protects it */
	_Atomic int inside;
	long per_thread[64];
};

static void body(struct stress_worker *w)
{
	struct lock_test *t = w->arg;
	void *node = NULL;
	if (t->ops->node_size) {
		node = aligned_alloc(SCALE_LINE, (t->ops->node_size + SCALE_LINE - 1) / SCALE_LINE * SCALE_LINE);
		CHECK(node != NULL, "out of memory");
	}
	while (stress_running(w)) {
		t->ops->lock(t->lock, node);
		CHECK(atomic_fetch_add_explicit(&t->inside, 1, memory_order_relaxed) == 0,
		      "%s: two holders at once", t->ops->name);
		t->counter++;
		atomic_fetch_sub_explicit(&t->inside, 1, memory_order_relaxed);
		t->ops->unlock(t->lock, node);
		t->per_thread[w->id]++;
		if (stress_rand(w) % 4096 == 0)
			stress_migrate(w);
	}
	free(node);
}

int main(void)
{
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w && n <= 64, "threads");
	for (const struct scale_lock_ops *const *k = scale_lock_kinds; *k; k++) {
		struct lock_test t = { .ops = *k };
		t.lock = aligned_alloc(SCALE_LINE, SCALE_LINE * ((t.ops->size + SCALE_LINE - 1) / SCALE_LINE));
		CHECK(t.lock && t.ops->init(t.lock) == 0, "init %s", t.ops->name);
		atomic_init(&t.inside, 0);
		memset(w, 0, n * sizeof(*w));
		stress_run(n, stress_seconds() / 2, body, &t, w);
		long sum = 0;
		for (unsigned i = 0; i < n; i++)
			sum += t.per_thread[i];
		CHECK(sum == t.counter && sum > 0, "%s: %ld acquisitions counted %ld", t.ops->name, sum, t.counter);
		CHECK(scale_lock_find(t.ops->name) == t.ops, "find %s", t.ops->name);
		t.ops->destroy(t.lock);
		free(t.lock);
		printf("PASS lock %s: %ld acquisitions, mutual exclusion held (%u threads on %u CPUs)\n",
		       t.ops->name, sum, n, stress_cpus());
	}
	free(w);
	return 0;
}
