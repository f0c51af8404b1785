/*
 * The Bonsai tree, in each of its three forms (RCU, rwlock, spinlock).
 *
 * Single-threaded: after every insert and remove, of sequential ranges (the worst case of a naive tree)
 * and of random ones, the tree is walked and compared with a model (a sorted array): in order, sizes
 * right, every node weight-balanced, every node live. Each inserted range is then found at its first,
 * middle and last byte and a removed one at none of them; periodically every range and every gap
 * between ranges is looked up.
 *
 * Stress: writers insert and remove ranges in regions of their own, so each knows exactly what its
 * region holds; readers meanwhile look up random addresses. A range's value is a function of its start
 * and end, so any range a reader finds can be checked against its own fields; some ranges are never
 * removed, and a reader must always find those, through every rotation. "Nothing freed while read": a
 * freed node is poisoned (BONSAI_DEAD) before free, and a reader checks the magic of the node it found
 * both before and after reading it, sometimes yielding the CPU in between to stretch its critical
 * section over a writer's reclamation (ASan reports any use after free anyway). At the end the tree is
 * compared with the writers' models.
 */
#include "scale/bonsai.h"
#include "stress.h"

#include <errno.h>
#include <string.h>
#include <urcu.h>

#define PAGE 4096ull

static const char *const form_name[] = {
	[BONSAI_RCU] = "rcu",
	[BONSAI_RWLOCK] = "rwlock",
	[BONSAI_SPINLOCK] = "spinlock",
};

/* What every range's value is: readers can check a range they find against its own fields. */
static uint64_t mix(uint64_t start, uint64_t end)
{
	uint64_t x = start * 0x9e3779b97f4a7c15ull ^ (end + 0x632be59bd9b4e019ull);
	return x ^ (x >> 29);
}

/* The model: sorted, disjoint ranges. */
struct model {
	struct bonsai_range *r;
	size_t n, cap;
};

/* The first range that ends after addr. */
static size_t model_lower(const struct model *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool model_overlaps(const struct model *m, uint64_t start, uint64_t end)
{
	size_t i = model_lower(m, start);
	return i < m->n && m->r[i].start < end;
}

static void model_add(struct model *m, uint64_t start, uint64_t end, uint64_t value)
{
	size_t i = model_lower(m, start);
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->r = realloc(m->r, m->cap * sizeof(*m->r));
		CHECK(m->r, "out of memory");
	}
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(*m->r));
	m->r[i] = (struct bonsai_range){ .start = start, .end = end, .value = value };
	m->n++;
}

static void model_del(struct model *m, size_t i)
{
	memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(*m->r));
	m->n--;
}

/* The structural check: an in-order walk against the model. */
struct walk {
	const struct model *m;
	size_t i;
	const char *form;
};

static uint32_t walk(struct walk *w, struct bonsai_node *n, unsigned depth)
{
	if (!n)
		return 0;
	CHECK(depth < 128, "%s: deeper than any weight-balanced tree of 2^32 nodes", w->form);
	CHECK(n->magic == BONSAI_LIVE, "%s: node [%#llx, %#llx) in the tree has magic %#x", w->form,
	      (unsigned long long)n->start, (unsigned long long)n->end, n->magic);
	CHECK(n->start < n->end, "%s: empty range", w->form);
	uint32_t l = walk(w, bonsai_left(n), depth + 1);
	CHECK(w->i < w->m->n, "%s: the tree has more ranges than the model", w->form);
	const struct bonsai_range *want = &w->m->r[w->i++];
	CHECK(n->start == want->start && n->end == want->end && n->value == want->value,
	      "%s: range %zu is [%#llx, %#llx) = %#llx, the model's [%#llx, %#llx) = %#llx", w->form, w->i - 1,
	      (unsigned long long)n->start, (unsigned long long)n->end, (unsigned long long)n->value,
	      (unsigned long long)want->start, (unsigned long long)want->end, (unsigned long long)want->value);
	uint32_t r = walk(w, bonsai_right(n), depth + 1);
	CHECK(n->size == l + r + 1, "%s: size %u, subtrees %u + %u", w->form, n->size, l, r);
	uint64_t wl = (uint64_t)l + 1, wr = (uint64_t)r + 1;
	CHECK(wl <= BONSAI_DELTA * wr && wr <= BONSAI_DELTA * wl,
	      "%s: node [%#llx, %#llx) out of balance: subtrees of %u and %u", w->form,
	      (unsigned long long)n->start, (unsigned long long)n->end, l, r);
	return l + r + 1;
}

static void verify(struct bonsai_tree *t, const struct model *m, const char *form)
{
	struct walk w = { .m = m, .i = 0, .form = form };
	bonsai_read_lock(t);
	walk(&w, atomic_load_explicit(&t->root, memory_order_acquire), 0);
	bonsai_read_unlock(t);
	CHECK(w.i == m->n, "%s: the tree has %zu ranges, the model %zu", form, w.i, m->n);
	CHECK(bonsai_count(t) == m->n, "%s: count %zu, the model has %zu", form, bonsai_count(t), m->n);
}

static void expect_at(struct bonsai_tree *t, uint64_t addr, const struct bonsai_range *want, const char *form)
{
	struct bonsai_range got;
	bool found = bonsai_lookup(t, addr, &got);
	if (!want) {
		CHECK(!found, "%s: %#llx found in [%#llx, %#llx), which is not mapped", form,
		      (unsigned long long)addr, (unsigned long long)got.start, (unsigned long long)got.end);
		return;
	}
	CHECK(found, "%s: %#llx not found, [%#llx, %#llx) is mapped", form, (unsigned long long)addr,
	      (unsigned long long)want->start, (unsigned long long)want->end);
	CHECK(got.start == want->start && got.end == want->end && got.value == want->value,
	      "%s: %#llx found in [%#llx, %#llx), not [%#llx, %#llx)", form, (unsigned long long)addr,
	      (unsigned long long)got.start, (unsigned long long)got.end, (unsigned long long)want->start,
	      (unsigned long long)want->end);
}

/* First, middle and last byte: all in the range if want is mapped, none if not. */
static void expect_range(struct bonsai_tree *t, const struct bonsai_range *r, bool mapped, const char *form)
{
	const struct bonsai_range *want = mapped ? r : NULL;
	expect_at(t, r->start, want, form);
	expect_at(t, r->start + (r->end - r->start) / 2, want, form);
	expect_at(t, r->end - 1, want, form);
}

/* Every range at three bytes, and every gap at its first and last byte. */
static void sweep(struct bonsai_tree *t, const struct model *m, const char *form)
{
	uint64_t gap = 0;
	for (size_t i = 0; i < m->n; i++) {
		expect_range(t, &m->r[i], true, form);
		if (gap < m->r[i].start) {
			expect_at(t, gap, NULL, form);
			expect_at(t, m->r[i].start - 1, NULL, form);
		}
		gap = m->r[i].end;
	}
	if (m->n == 0 || gap != 0) {
		expect_at(t, gap, NULL, form);
		expect_at(t, UINT64_MAX, NULL, form);
	}
}

static void insert_ok(struct bonsai_tree *t, struct model *m, uint64_t start, uint64_t end, const char *form)
{
	int err = bonsai_insert(t, start, end, mix(start, end));
	CHECK(err == 0, "%s: insert [%#llx, %#llx): %d", form, (unsigned long long)start,
	      (unsigned long long)end, err);
	model_add(m, start, end, mix(start, end));
	verify(t, m, form);
	expect_range(t, &(struct bonsai_range){ start, end, mix(start, end) }, true, form);
}

static void remove_ok(struct bonsai_tree *t, struct model *m, size_t i, const char *form)
{
	struct bonsai_range r = m->r[i];
	uint64_t v = 0;
	int err = bonsai_remove(t, r.start, &v);
	CHECK(err == 0, "%s: remove %#llx: %d", form, (unsigned long long)r.start, err);
	CHECK(v == r.value, "%s: remove returned value %#llx, not %#llx", form, (unsigned long long)v,
	      (unsigned long long)r.value);
	model_del(m, i);
	verify(t, m, form);
	expect_range(t, &r, false, form);
}

/* Ascending or descending slots of 4 pages, each range 1 to 3 pages: a gap after every one. */
static void sequential(struct bonsai_tree *t, struct model *m, const char *form, bool down)
{
	const unsigned n = 1000;
	for (unsigned k = 0; k < n; k++) {
		uint64_t s = (uint64_t)(down ? n - 1 - k : k) * 4 * PAGE + PAGE;
		insert_ok(t, m, s, s + (1 + s / PAGE % 3) * PAGE, form);
	}
	sweep(t, m, form);

	/* Overlaps of every shape are refused; a range that fills a gap exactly is not. */
	const struct bonsai_range *r = &m->r[n / 2], *next = &m->r[n / 2 + 1];
	uint64_t s = r->start, e = r->end;
	CHECK(bonsai_insert(t, s, e, 1) == EEXIST, "%s: the same range mapped twice", form);
	CHECK(bonsai_insert(t, s - 1, s + 1, 1) == EEXIST, "%s: overlap at the start", form);
	CHECK(bonsai_insert(t, e - 1, e + 1, 1) == EEXIST, "%s: overlap at the end", form);
	CHECK(bonsai_insert(t, s + 1, s + 2, 1) == EEXIST, "%s: range inside another", form);
	CHECK(bonsai_insert(t, s - PAGE, next->end + PAGE, 1) == EEXIST, "%s: range around two", form);
	CHECK(bonsai_insert(t, s, s, 1) == EINVAL && bonsai_insert(t, e, s, 1) == EINVAL, "%s: empty range", form);
	CHECK(bonsai_remove(t, s + 1, NULL) == ENOENT, "%s: removed by an address inside", form);
	CHECK(bonsai_remove(t, e, NULL) == ENOENT, "%s: removed a gap", form);
	verify(t, m, form);
	uint64_t gap_end = next->start;
	insert_ok(t, m, e, gap_end, form);
	remove_ok(t, m, model_lower(m, e), form);

	while (m->n)
		remove_ok(t, m, down ? m->n - 1 : 0, form);
	sweep(t, m, form);
}

/* Random ranges in 16 MiB, many of them refused as overlaps; then everything removed at random. */
static void random_ranges(struct bonsai_tree *t, struct model *m, const char *form)
{
	uint64_t rng = 0x243f6a8885a308d3ull;
	struct stress_worker w = { .rng = rng };
	const uint64_t base = 1ull << 40, space = 16ull << 20;
	long refused = 0;
	for (int op = 0; op < 20000; op++) {
		if (m->n && stress_rand(&w) % 100 < 45) {
			remove_ok(t, m, stress_rand(&w) % m->n, form);
		} else if (stress_rand(&w) % 16 == 0) {
			/* A start that is not one: inside a range or in a gap. */
			uint64_t a = base + stress_rand(&w) % space;
			size_t i = model_lower(m, a);
			if (!(i < m->n && m->r[i].start == a))
				CHECK(bonsai_remove(t, a, NULL) == ENOENT, "%s: removed %#llx, which starts nothing",
				      form, (unsigned long long)a);
		} else {
			uint64_t s = base + stress_rand(&w) % space;
			uint64_t e = s + 1 + stress_rand(&w) % (64 << 10);
			if (model_overlaps(m, s, e)) {
				CHECK(bonsai_insert(t, s, e, 1) == EEXIST, "%s: overlapping [%#llx, %#llx) mapped",
				      form, (unsigned long long)s, (unsigned long long)e);
				refused++;
			} else {
				insert_ok(t, m, s, e, form);
			}
		}
		if (op % 2000 == 0)
			sweep(t, m, form);
	}
	CHECK(refused > 1000, "%s: only %ld overlapping inserts tried", form, refused);
	sweep(t, m, form);
	/* The very top of the address space: end is exclusive, so the last byte stays unmapped. */
	insert_ok(t, m, UINT64_MAX - PAGE, UINT64_MAX, form);
	sweep(t, m, form);
	while (m->n)
		remove_ok(t, m, stress_rand(&w) % m->n, form);
	sweep(t, m, form);
}

static void single_threaded(enum bonsai_sync sync)
{
	const char *form = form_name[sync];
	struct bonsai_tree t;
	struct model m = { 0 };
	CHECK(bonsai_init(&t, sync) == 0, "init");
	CHECK(bonsai_count(&t) == 0, "%s: a new tree is not empty", form);
	CHECK(bonsai_remove(&t, 0, NULL) == ENOENT, "%s: removed from an empty tree", form);
	sweep(&t, &m, form);
	sequential(&t, &m, form, false);
	sequential(&t, &m, form, true);
	random_ranges(&t, &m, form);
	/* Destroy with ranges in it: LSan checks that it frees them all. */
	for (uint64_t k = 0; k < 100; k++)
		insert_ok(&t, &m, k * 2 * PAGE, k * 2 * PAGE + PAGE, form);
	bonsai_destroy(&t);
	free(m.r);
	printf("PASS bonsai/%s single-threaded: ordered, weight-balanced and found after every update\n", form);
}

/*
 * The stress test. Writer w owns a region of REGION_PAGES pages; every STABLE_EVERY-th page of it holds
 * a one-page range that is never removed, so the churn's rotations keep moving the stable ranges
 * around. Writers know their regions exactly (one byte per page); readers know only the stable ranges.
 */
#define WRITERS 2
#define REGION_PAGES 4096
#define STABLE_EVERY 32
#define MAX_LEN 8
#define TARGET 150	/* ranges a writer keeps about, besides the stable ones */

enum { PG_FREE, PG_STABLE, PG_START, PG_BODY };

struct region {
	uint64_t base;
	uint8_t page[REGION_PAGES];
	uint32_t starts[REGION_PAGES];	/* the pages where this writer's ranges start */
	unsigned nstarts;
	long inserts, removes, refused;
};

struct stress_ctx {
	struct bonsai_tree t;
	enum bonsai_sync sync;
	struct region regions[WRITERS];
	_Atomic long lookups, found, stable_found;
};

static uint64_t region_base(unsigned w)
{
	return (3ull << 32) + (uint64_t)w * (REGION_PAGES + 64) * PAGE;
}

static uint64_t page_addr(const struct region *r, unsigned p)
{
	return r->base + (uint64_t)p * PAGE;
}

/* The length of the range starting at page p, read off the page map. */
static unsigned range_len(const struct region *r, unsigned p)
{
	unsigned n = 1;
	while (p + n < REGION_PAGES && r->page[p + n] == PG_BODY)
		n++;
	return n;
}

static void writer(struct stress_worker *w, struct stress_ctx *c, struct region *r)
{
	while (stress_running(w)) {
		uint64_t dice = stress_rand(w) % 100;
		if (r->nstarts && (r->nstarts >= TARGET ? dice < 60 : dice < 40)) {
			unsigned i = (unsigned)(stress_rand(w) % r->nstarts), p = r->starts[i];
			unsigned len = range_len(r, p);
			uint64_t s = page_addr(r, p), e = s + len * PAGE, v = 0;
			CHECK(bonsai_remove(&c->t, s, &v) == 0, "remove %#llx", (unsigned long long)s);
			CHECK(v == mix(s, e), "remove %#llx returned a wrong value", (unsigned long long)s);
			memset(&r->page[p], PG_FREE, len);
			r->starts[i] = r->starts[--r->nstarts];
			r->removes++;
			/* Nobody else maps in this region: the range must be gone for every lookup now. */
			struct bonsai_range got;
			CHECK(!bonsai_lookup(&c->t, s, &got) && !bonsai_lookup(&c->t, e - 1, &got),
			      "removed range still found");
		} else if (dice < 95) {
			unsigned p = (unsigned)(stress_rand(w) % REGION_PAGES);
			unsigned len = 1 + (unsigned)(stress_rand(w) % MAX_LEN);
			if (p + len > REGION_PAGES)
				len = REGION_PAGES - p;
			bool clash = false;
			for (unsigned q = p; q < p + len; q++)
				clash |= r->page[q] != PG_FREE;
			uint64_t s = page_addr(r, p), e = s + len * PAGE;
			int err = bonsai_insert(&c->t, s, e, mix(s, e));
			if (clash) {
				CHECK(err == EEXIST, "overlapping insert [%#llx, %#llx): %d", (unsigned long long)s,
				      (unsigned long long)e, err);
				r->refused++;
				continue;
			}
			CHECK(err == 0, "insert [%#llx, %#llx): %d", (unsigned long long)s, (unsigned long long)e, err);
			r->page[p] = PG_START;
			memset(&r->page[p + 1], PG_BODY, len - 1);
			r->starts[r->nstarts++] = p;
			r->inserts++;
			struct bonsai_range got;
			CHECK(bonsai_lookup(&c->t, e - 1, &got) && got.start == s && got.end == e,
			      "inserted range not found");
		} else {
			/* A start that is not one. */
			unsigned p = (unsigned)(stress_rand(w) % REGION_PAGES);
			if (r->page[p] != PG_START && r->page[p] != PG_STABLE)
				CHECK(bonsai_remove(&c->t, page_addr(r, p), NULL) == ENOENT, "removed a non-start");
		}
		if (stress_rand(w) % 512 == 0)
			stress_migrate(w);
	}
}

static void reader(struct stress_worker *w, struct stress_ctx *c)
{
	long lookups = 0, found = 0, stable_found = 0;
	/* Yielding inside a spinlock would leave the other threads spinning for a time slice. */
	bool may_yield = c->sync != BONSAI_SPINLOCK;
	while (stress_running(w)) {
		const struct region *r = &c->regions[stress_rand(w) % WRITERS];
		bool stable = stress_rand(w) % 2;
		uint64_t addr;
		if (stable)
			addr = page_addr(r, (unsigned)(stress_rand(w) % (REGION_PAGES / STABLE_EVERY)) * STABLE_EVERY) +
			       stress_rand(w) % PAGE;
		else
			addr = r->base - 16 * PAGE + stress_rand(w) % ((REGION_PAGES + 32) * PAGE);

		bonsai_read_lock(&c->t);
		struct bonsai_node *n = bonsai_find(&c->t, addr);
		if (n) {
			CHECK(n->magic == BONSAI_LIVE, "found a node with magic %#x: freed while read", n->magic);
			uint64_t s = n->start, e = n->end, v = n->value;
			if (may_yield && stress_rand(w) % 64 == 0)
				sched_yield();
			CHECK(s <= addr && addr < e, "%#llx found in [%#llx, %#llx)", (unsigned long long)addr,
			      (unsigned long long)s, (unsigned long long)e);
			CHECK(v == mix(s, e), "range [%#llx, %#llx) has a value never inserted for it",
			      (unsigned long long)s, (unsigned long long)e);
			CHECK(n->start == s && n->end == e && n->value == v, "a published node changed");
			CHECK(n->magic == BONSAI_LIVE, "magic %#x after reading: freed while read", n->magic);
			found++;
			if (stable) {
				CHECK(e - s == PAGE && s == addr - (addr - r->base) % PAGE,
				      "stable range at %#llx found as [%#llx, %#llx)", (unsigned long long)addr,
				      (unsigned long long)s, (unsigned long long)e);
				stable_found++;
			}
		}
		bonsai_read_unlock(&c->t);
		CHECK(n || !stable, "stable range at %#llx missed", (unsigned long long)addr);
		lookups++;
		if (stress_rand(w) % 1024 == 0)
			stress_migrate(w);
	}
	atomic_fetch_add(&c->lookups, lookups);
	atomic_fetch_add(&c->found, found);
	atomic_fetch_add(&c->stable_found, stable_found);
}

static void body(struct stress_worker *w)
{
	struct stress_ctx *c = w->arg;
	rcu_register_thread();
	if (w->id < WRITERS)
		writer(w, c, &c->regions[w->id]);
	else
		reader(w, c);
	rcu_unregister_thread();
}

static void stress(enum bonsai_sync sync)
{
	const char *form = form_name[sync];
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	struct stress_ctx *c = calloc(1, sizeof(*c));
	CHECK(w && c, "out of memory");
	CHECK(n > WRITERS, "%u threads", n);
	c->sync = sync;
	CHECK(bonsai_init(&c->t, sync) == 0, "init");
	atomic_init(&c->lookups, 0);
	atomic_init(&c->found, 0);
	atomic_init(&c->stable_found, 0);
	for (unsigned k = 0; k < WRITERS; k++) {
		struct region *r = &c->regions[k];
		r->base = region_base(k);
		for (unsigned p = 0; p < REGION_PAGES; p += STABLE_EVERY) {
			uint64_t s = page_addr(r, p);
			CHECK(bonsai_insert(&c->t, s, s + PAGE, mix(s, s + PAGE)) == 0, "stable insert");
			r->page[p] = PG_STABLE;
		}
	}
	stress_run(n, stress_seconds(), body, c, w);

	/* The tree against the writers' models, stable ranges included. */
	struct model m = { 0 };
	long inserts = 0, removes = 0, refused = 0;
	for (unsigned k = 0; k < WRITERS; k++) {
		struct region *r = &c->regions[k];
		for (unsigned p = 0; p < REGION_PAGES; p++) {
			if (r->page[p] == PG_STABLE || r->page[p] == PG_START) {
				uint64_t s = page_addr(r, p), e = s + range_len(r, p) * PAGE;
				model_add(&m, s, e, mix(s, e));
			}
		}
		inserts += r->inserts;
		removes += r->removes;
		refused += r->refused;
	}
	verify(&c->t, &m, form);
	sweep(&c->t, &m, form);
	long lookups = atomic_load(&c->lookups), stable_found = atomic_load(&c->stable_found);
	CHECK(lookups > 1000, "%s: only %ld lookups", form, lookups);
	CHECK(stable_found > 100, "%s: only %ld stable ranges found", form, stable_found);
	CHECK(inserts > 100 && removes > 100, "%s: only %ld inserts and %ld removes", form, inserts, removes);
	bonsai_destroy(&c->t);
	free(m.r);
	printf("PASS bonsai/%s stress: %ld lookups (%ld found), %ld inserts, %ld removes, %ld overlaps refused, "
	       "no node freed while read (%u threads on %u CPUs)\n",
	       form, lookups, atomic_load(&c->found), inserts, removes, refused, n, stress_cpus());
	free(c);
	free(w);
}

int main(void)
{
	/* The main thread reads and updates RCU-form trees too. */
	rcu_register_thread();
	for (enum bonsai_sync s = BONSAI_RCU; s <= BONSAI_SPINLOCK; s++) {
		single_threaded(s);
		stress(s);
	}
	rcu_unregister_thread();
	return 0;
}
