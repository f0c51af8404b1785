/*
 * Per page: write it, MADV_DONTNEED it (zap and TLB flush), read it back. One iteration per page. The
 * private mappings read zero back (a fresh page), the shared file mapping reads the byte from the page
 * cache. 128 MB of the task's own file, or 1 MB anonymous, as will-it-scale has them.
 */
#include "mapping.h"

static void run(struct micro_task *t)
{
	const struct mapping *m = t->priv;
	size_t page = (size_t)getpagesize();
	const char expect = (m->flags & MAP_SHARED) ? 1 : 0;
	for (;;) {
		char *p = mapping_map(t, m);
		for (size_t off = 0; off < m->size; off += page) {
			*(volatile char *)(p + off) = 1;
			madvise(p + off, page, MADV_DONTNEED);
			MICRO_FAIL_ON(t, *(volatile char *)(p + off) != expect, "page content after MADV_DONTNEED");
			micro_count(t);
		}
		munmap(p, m->size);
	}
}

static int init_anon(struct micro_task *t)
{
	return mapping_init(t, -1, MAP_PRIVATE | MAP_ANONYMOUS, 1UL << 20);
}

MICRO_TEST(tlb_flush1, .description = "TLB flush of separate file private mapping",
	   .init = mapping_init_private_file, .run = run);
MICRO_TEST(tlb_flush2, .description = "TLB flush of anonymous memory private mapping", .init = init_anon,
	   .run = run);
MICRO_TEST(tlb_flush3, .description = "TLB flush of separate file shared mapping",
	   .init = mapping_init_shared_file, .run = run);
