/*
 * Lock-free comparison: hunts for torn reads and for references taken on a killed entry. A writer
 * renames the entry between two names that differ in every word; a name made of half of each must never
 * match (it would, were a reader's copy taken mid-rename). After the kill no lookup may succeed, and
 * every reference taken is given back.
 */
#include "scale/lfcmp.h"
#include "stress.h"

#include <string.h>

static struct ldentry dentry;
static struct ldentry_name name_a, name_b, torn, other_parent;
static atomic_bool killed;
static bool lockfree;
static _Atomic long successes;

static bool get(const struct ldentry_name *n)
{
	return lockfree ? ldentry_get_lockfree(&dentry, n) : ldentry_get_locked(&dentry, n);
}

static void put(void)
{
	if (lockfree)
		ldentry_put_lockfree(&dentry);
	else
		ldentry_put_locked(&dentry);
}

static void body(struct stress_worker *w)
{
	long ok = 0;
	if (w->id == 0) {
		/*
		 * The writer keeps a CPU to itself where there are two, so a reader is always copying
		 * fields while a rename is under way: that is when a torn copy can happen.
		 */
		if (stress_cpus() > 1)
			stress_migrate(w);
		for (unsigned long i = 0; stress_running(w); i++)
			ldentry_rename(&dentry, i % 2 ? &name_a : &name_b);
		return;
	}
	if (stress_cpus() > 1) {	/* readers on the other CPUs */
		w->next_cpu = 1 + w->id % (stress_cpus() - 1);
		stress_migrate(w);
	}
	while (stress_running(w)) {
		bool after_kill = atomic_load_explicit(&killed, memory_order_acquire);
		uint64_t r = stress_rand(w);
		CHECK(!get(&torn), "a half-renamed name matched: torn read");
		CHECK(!get(&other_parent), "matched under another parent");
		if (get(r % 2 ? &name_a : &name_b)) {
			CHECK(!after_kill, "lookup succeeded on a killed entry");
			ok++;
			put();
		}
		if (w->id == 1 && r % 50000 == 0 && !after_kill && ok > 1000) {
			CHECK(ldentry_kill(&dentry) >= 0, "kill");
			atomic_store_explicit(&killed, true, memory_order_release);
		}
		if (r % 4096 == 1 && stress_cpus() > 2) {
			w->next_cpu = 1 + w->next_cpu % (stress_cpus() - 1);
			stress_migrate(w);
		}
	}
	atomic_fetch_add(&successes, ok);
}

static void run(bool scalable)
{
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w, "out of memory");
	lockfree = scalable;
	atomic_store(&killed, false);
	atomic_store(&successes, 0);
	CHECK(ldentry_init(&dentry, &name_a, 8) == 0, "init");
	stress_run(n, stress_seconds() / 2, body, NULL, w);
	if (!atomic_load(&killed))
		ldentry_kill(&dentry);
	CHECK(!get(&name_a) && !get(&name_b), "lookup succeeded after kill");
	long held = ldentry_kill(&dentry);
	CHECK(held == 0, "%ld references left after every get was put", held);
	CHECK(atomic_load(&successes) > 0, "no lookup ever succeeded");
	ldentry_destroy(&dentry);
	free(w);
	printf("PASS ldentry %s: %ld lookups matched, no torn match, none after kill (%u threads on %u CPUs)\n",
	       scalable ? "lock-free" : "locked", atomic_load(&successes), n, stress_cpus());
}

int main(void)
{
	char a[LDENTRY_NAME_MAX + 1], b[LDENTRY_NAME_MAX + 1], t[LDENTRY_NAME_MAX + 1];
	memset(a, 'a', LDENTRY_NAME_MAX);
	memset(b, 'b', LDENTRY_NAME_MAX);
	memcpy(t, a, LDENTRY_NAME_MAX / 2);
	memcpy(t + LDENTRY_NAME_MAX / 2, b, LDENTRY_NAME_MAX / 2);
	a[LDENTRY_NAME_MAX] = b[LDENTRY_NAME_MAX] = t[LDENTRY_NAME_MAX] = 0;
	CHECK(ldentry_name_set(&name_a, 7, a) && ldentry_name_set(&name_b, 7, b) && ldentry_name_set(&torn, 7, t) &&
		      ldentry_name_set(&other_parent, 8, a), "names");
	struct ldentry_name too_long;
	char long_name[LDENTRY_NAME_MAX + 2];
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	CHECK(!ldentry_name_set(&too_long, 1, long_name), "an over-long name was accepted");
	run(false);
	run(true);
	return 0;
}
