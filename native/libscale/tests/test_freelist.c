/*
 * Free lists: no object is ever handed out twice, none is lost. Each object records its owner with a
 * CAS on allocation; threads hold a few, free them (often on another CPU after a migration), and at the
 * end every object is back on some list.
 */
#include "scale/freelist.h"
#include "stress.h"

#define OBJECTS 4096
#define HOLD 16

struct object {
	struct fl_obj link;
	_Atomic unsigned owner;	/* 0: free */
};

static struct object objects[OBJECTS];
static struct pc_freelist pcf;
static struct global_freelist gf;
static bool scalable;
static _Atomic long allocations;

static struct object *take(void)
{
	return (struct object *)(scalable ? pc_freelist_alloc(&pcf) : global_freelist_alloc(&gf));
}

static void give(struct object *o)
{
	if (scalable)
		pc_freelist_free(&pcf, &o->link);
	else
		global_freelist_free(&gf, &o->link);
}

static void body(struct stress_worker *w)
{
	struct object *held[HOLD];
	long n = 0;
	while (stress_running(w)) {
		int k = 1 + (int)(stress_rand(w) % HOLD);
		int got = 0;
		for (; got < k; got++) {
			if (!(held[got] = take()))
				break;
			unsigned free_mark = 0;
			CHECK(atomic_compare_exchange_strong(&held[got]->owner, &free_mark, w->id + 1),
			      "object %ld handed out twice (owner %u)", (long)(held[got] - objects), free_mark);
		}
		n += got;
		if (stress_rand(w) % 16 == 0)
			stress_migrate(w);
		while (got-- > 0) {
			atomic_store(&held[got]->owner, 0);
			give(held[got]);
		}
	}
	atomic_fetch_add(&allocations, n);
}

static void run(bool pc)
{
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w, "out of memory");
	scalable = pc;
	atomic_store(&allocations, 0);
	if (pc)
		CHECK(pc_freelist_init(&pcf, 8) == 0, "init");
	else
		global_freelist_init(&gf);
	for (int i = 0; i < OBJECTS; i++)
		give(&objects[i]);
	stress_run(n, stress_seconds() / 2, body, NULL, w);
	long free_now = pc ? pc_freelist_count(&pcf) : gf.list.count;
	CHECK(free_now == OBJECTS, "%ld of %d objects on the lists at the end", free_now, OBJECTS);
	for (int i = 0; i < OBJECTS; i++)
		CHECK(atomic_load(&objects[i].owner) == 0, "object %d still owned", i);
	if (pc)
		pc_freelist_destroy(&pcf);
	free(w);
	printf("PASS %s free list: %ld allocations, none twice, none lost (%u threads on %u CPUs)\n",
	       pc ? "per-core" : "global", atomic_load(&allocations), n, stress_cpus());
}

int main(void)
{
	run(false);
	run(true);
	return 0;
}
