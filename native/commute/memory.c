/*
 * Memory: mmap, munmap, mprotect, and memory reads and writes, in one address space (threads) or in
 * each process's copy of it.
 *
 * prepare() reserves one inaccessible region, a guard page then a one-page range per object, and puts
 * a fence where the kernel places new mappings (micro_fence_mappings). A range is, as its role needs at
 * rest, a hole (mmap MAP_FIXED fills it), anonymous read-write memory faulted in by MAP_POPULATE before
 * any task starts (a private writable mapping is populated by write faults: a page of its own, not the
 * shared zero page), or left as part of the reservation. Between inaccessible
 * guards, a range's mapping never merges with a neighbour's, so a call on one range changes one VMA.
 * Memory reads and writes are relaxed atomics: one plain load or store on x86-64, and no data race for
 * ThreadSanitizer where two tasks meet on one byte.
 */
#include "commute.h"

#include <sys/mman.h>
#include <unistd.h>

/* What a role's range must be at rest; with neither, it stays part of the inaccessible reservation. */
enum { NEED_HOLE = 1, NEED_MAPPED = 2 };

struct mem_obj {
	char *range;	/* one page */
	size_t page;
	size_t byte;	/* the byte memread and memwrite touch */
	char old;	/* its value at rest */
};

struct memory_situation {
	const struct commute_op *op[2];
	bool same;		/* role 1 works on role 0's range */
	size_t byte[2];		/* each role's byte in its page */
};

static struct mem_obj *mem_objs;

/* A range's mapping at rest, and as munmap's undo puts it back: populated, with no access from user space. */
static void *map_populated(const struct mem_obj *o)
{
	return mmap(o->range, o->page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
}

static int make_range(struct mem_obj *o, unsigned needs)
{
	if (needs & NEED_MAPPED)
		return map_populated(o) == o->range ? 0 : errno;
	return (needs & NEED_HOLE) && munmap(o->range, o->page) ? errno : 0;
}

static int memory_prepare(const struct memory_situation *s, const char *workdir, unsigned ntasks)
{
	unsigned n = commute_nobjs(ntasks);
	size_t page = (size_t)getpagesize();
	(void)workdir;
	char *base = mmap(NULL, (2 * n + 1) * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return errno;
	if (!(mem_objs = calloc(n, sizeof(*mem_objs))))
		return ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		/* A range shared by a call that needs a hole and one that needs a mapping starts mapped. */
		unsigned needs = commute_needs(s->op, s->same, i % 2);
		mem_objs[i] = (struct mem_obj){ .range = base + (2 * i + 1) * page, .page = page };
		int err = make_range(&mem_objs[i], needs);
		if (err)
			return err;
	}
	/* A fence just above where mmap without MAP_FIXED puts a page from now on: it merges into nothing above. */
	return micro_fence_mappings(page);
}

static int memory_init(const struct memory_situation *s, struct micro_task *t)
{
	unsigned role;
	struct mem_obj *o = commute_adopt(t, s->op, s->same, mem_objs, sizeof(*mem_objs), &role);
	if (!o)
		return ENOMEM;
	o->byte = s->byte[role];
	if (s->op[role]->needs & NEED_MAPPED)
		o->old = __atomic_load_n(o->range + o->byte, __ATOMIC_RELAXED);
	return 0;
}

static void map_fixed(struct micro_task *t, const struct mem_obj *o, int prot, const char *what)
{
	void *p = mmap(o->range, o->page, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	MICRO_FAIL_ON(t, p != o->range, what);
}

/* mmap of an anonymous read-write page MAP_FIXED into the range (+munmap). */
static void mem_mmap(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	map_fixed(t, o, PROT_READ | PROT_WRITE, "mmap MAP_FIXED");
	MICRO_FAIL_ON(t, munmap(o->range, o->page), "munmap (undo of mmap)");
}

/* The same, read-only: beside a read-write mmap of the same range, the order decides the protection. */
static void mem_mmap_ro(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	map_fixed(t, o, PROT_READ, "mmap MAP_FIXED");
	MICRO_FAIL_ON(t, munmap(o->range, o->page), "munmap (undo of mmap)");
}

/* mmap of an anonymous page where the kernel chooses (+munmap). */
static void mem_mmap_any(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	void *q = mmap(NULL, o->page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MICRO_FAIL_ON(t, q == MAP_FAILED, "mmap");
	MICRO_FAIL_ON(t, munmap(q, o->page), "munmap (undo of mmap)");
}

/*
 * munmap of the faulted-in page (+mmap back, populated): it frees a page, as munmap of used memory does.
 * MAP_POPULATE, not a store: beside a call that unmaps the same range, the page may be gone before it.
 */
static void mem_munmap(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	MICRO_FAIL_ON(t, munmap(o->range, o->page), "munmap");
	MICRO_FAIL_ON(t, map_populated(o) != o->range, "mmap MAP_FIXED|MAP_POPULATE (undo of munmap)");
}

/* mprotect read-only (+back to read-write). */
static void mem_mprotect(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	MICRO_FAIL_ON(t, mprotect(o->range, o->page, PROT_READ), "mprotect");
	MICRO_FAIL_ON(t, mprotect(o->range, o->page, PROT_READ | PROT_WRITE), "mprotect (undo of mprotect)");
}

static void mem_read(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	(void)t;
	(void)__atomic_load_n(o->range + o->byte, __ATOMIC_RELAXED);
}

/* A new value (+the old one back): the byte at rest never changes, so a reader sees old or new by the order. */
static void mem_write(struct micro_task *t, void *p)
{
	const struct mem_obj *o = p;
	(void)t;
	__atomic_store_n(o->range + o->byte, (char)~o->old, __ATOMIC_RELAXED);
	__atomic_store_n(o->range + o->byte, o->old, __ATOMIC_RELAXED);
}

static const struct commute_op m_mmap = { mem_mmap, NEED_HOLE }, m_mmap_ro = { mem_mmap_ro, NEED_HOLE },
				m_mmap_any = { mem_mmap_any, 0 }, m_munmap = { mem_munmap, NEED_MAPPED },
				m_mprotect = { mem_mprotect, NEED_MAPPED }, m_read = { mem_read, NEED_MAPPED },
				m_write = { mem_write, NEED_MAPPED };

#define MEMORY(id, name, verdict, mode, state, why, ...) \
	COMMUTE_SITUATION(memory, id, name, verdict, mode, state, why, __VA_ARGS__)

/* The state texts' common parts. */
#define RANGES "one process; a one-page range per task between inaccessible guard pages"
#define PAGES "one process; a faulted-in page per task between inaccessible guard pages"
#define PAGE_PAIR "one process; a faulted-in page per pair between inaccessible guard pages"

MEMORY(mmap_mmap_any, "mmap-mmap/anywhere", commutes, threads,
       "one process; A and B each mmap an anonymous page where the kernel chooses (side by side, below a "
       "fence) and munmap it",
       "mmap without MAP_FIXED may return any free address, so each order's results are possible results "
       "of the other",
       .op = { &m_mmap_any, &m_mmap_any });
MEMORY(mmap_mmap, "mmap-mmap/disjoint-fixed", commutes, threads,
       RANGES ", a hole; A and B each mmap an anonymous page MAP_FIXED into their own hole and munmap it",
       "disjoint ranges: each mapping and result is the same in either order",
       .op = { &m_mmap, &m_mmap });
MEMORY(mmap_mmap_overlap, "mmap-mmap/overlapping-fixed", conflicts, threads,
       "one process; a one-page hole per pair between inaccessible guard pages; A mmaps an anonymous "
       "read-only page MAP_FIXED into it and B a read-write one, each then munmaps it",
       "the same range: the later mmap replaces the earlier, so whether the page ends up writable depends "
       "on the order",
       .op = { &m_mmap_ro, &m_mmap }, .same = true);
MEMORY(mmap_mmap_procs, "mmap-mmap/overlapping-fixed-procs", commutes, procs,
       "one process per task, each with its own copy of the address space; a one-page hole per pair; A mmaps "
       "an anonymous read-only page MAP_FIXED into it and B a read-write one at the same address, each then "
       "munmaps it",
       "separate address spaces: the same address names different state in each process",
       .op = { &m_mmap_ro, &m_mmap }, .same = true);
MEMORY(mmap_munmap, "mmap-munmap/disjoint-ranges", commutes, threads,
       RANGES ", A's a hole, B's mapped and faulted in; A mmaps an anonymous page MAP_FIXED into its hole and "
       "munmaps it, B munmaps its page and mmaps it back populated",
       "disjoint ranges: each call's result and each range's mapping are the same in either order",
       .op = { &m_mmap, &m_munmap });
MEMORY(mmap_munmap_overlap, "mmap-munmap/overlapping", conflicts, threads,
       "one process; a one-page range per pair between inaccessible guard pages, mapped and faulted in at the "
       "start; A mmaps an anonymous page MAP_FIXED there and munmaps it, B munmaps the range and mmaps it "
       "back populated",
       "the same range: mmap then munmap leaves it unmapped, munmap then mmap leaves it mapped",
       .op = { &m_mmap, &m_munmap }, .same = true);
MEMORY(mmap_mprotect, "mmap-mprotect/disjoint-ranges", commutes, threads,
       RANGES ", A's a hole, B's mapped and faulted in; A mmaps an anonymous page MAP_FIXED into its hole and "
       "munmaps it, B mprotects its page read-only and back to read-write",
       "disjoint ranges: each call's result and each range's mapping are the same in either order",
       .op = { &m_mmap, &m_mprotect });
MEMORY(munmap_munmap, "munmap-munmap/disjoint-ranges", commutes, threads,
       PAGES "; A and B each munmap their own page and mmap it back populated",
       "disjoint ranges: each munmap removes only its own page, in either order",
       .op = { &m_munmap, &m_munmap });
MEMORY(munmap_mprotect, "munmap-mprotect/disjoint-ranges", commutes, threads,
       PAGES "; A munmaps its own page and mmaps it back populated, B mprotects its own page read-only and "
       "back to read-write",
       "disjoint ranges: each call's result and each range's mapping are the same in either order",
       .op = { &m_munmap, &m_mprotect });
MEMORY(munmap_memread, "munmap-memread/disjoint-pages", commutes, threads,
       PAGES "; A munmaps its own page and mmaps it back populated, B reads byte 0 of its own page",
       "different pages: the read returns the same byte whether or not A's page is mapped",
       .op = { &m_munmap, &m_read });
MEMORY(mprotect_mprotect, "mprotect-mprotect/disjoint-ranges", commutes, threads,
       PAGES "; A and B each mprotect their own page read-only and back to read-write",
       "disjoint ranges: each page's protection is the same in either order",
       .op = { &m_mprotect, &m_mprotect });
MEMORY(mprotect_memread, "mprotect-memread/same-page", commutes, threads,
       PAGE_PAIR "; A mprotects it read-only and back to read-write, B reads its byte 0",
       "the page stays readable under both protections, so the read returns the same byte in either order",
       .op = { &m_mprotect, &m_read }, .same = true);
MEMORY(memread_memread, "memread-memread/same-page", commutes, threads,
       PAGE_PAIR "; A and B each read its byte 0",
       "reads only: both return the same byte",
       .op = { &m_read, &m_read }, .same = true);
MEMORY(memread_memwrite, "memread-memwrite/same-page", conflicts, threads,
       PAGE_PAIR "; A reads its byte 0, B writes a new value into byte 0 and the old one back",
       "the same byte: the read returns the old value before the write and the new one after it",
       .op = { &m_read, &m_write }, .same = true);
MEMORY(memread_memwrite_disjoint, "memread-memwrite/disjoint-pages", commutes, threads,
       PAGES "; A reads byte 0 of its own page, B writes a new value into byte 0 of its own page and the old "
       "one back",
       "different pages: the read returns the same byte whatever B writes",
       .op = { &m_read, &m_write });
MEMORY(memwrite_memwrite, "memwrite-memwrite/disjoint-pages", commutes, threads,
       PAGES "; A and B each write a new value into byte 0 of their own page and the old one back",
       "different pages: memory ends the same in either order",
       .op = { &m_write, &m_write });
MEMORY(memwrite_memwrite_line, "memwrite-memwrite/same-line", commutes, threads,
       PAGE_PAIR "; A writes a new value into its byte 0 and the old one back, B the same into byte 32 of the "
       "same 64-byte cache line",
       "different bytes: memory ends the same in either order; only this layout puts them on one cache "
       "line, which an implementation need not do",
       .op = { &m_write, &m_write }, .same = true, .byte = { 0, 32 });
