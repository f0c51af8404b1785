/*
 * Write faults: map 128 MB, write one byte per page, unmap. An iteration is one fault. Anonymous memory
 * (page allocation, zeroing, LRU, memcg charging), a private file mapping (page cache lookup and a
 * private copy), a shared file mapping (page cache, dirty tracking, the file's rmap tree).
 */
#include "mapping.h"

static void run(struct micro_task *t)
{
	const struct mapping *m = t->priv;
	size_t page = (size_t)getpagesize();
	for (;;) {
		char *p = mapping_map(t, m);
		for (size_t off = 0; off < m->size; off += page) {
			p[off] = 0;
			micro_count(t);
		}
		munmap(p, m->size);
	}
}

MICRO_TEST(page_fault1, .description = "Anonymous memory page fault", .init = mapping_init_anon, .run = run);
MICRO_TEST(page_fault2, .description = "Separate file private mapping page fault",
	   .init = mapping_init_private_file, .run = run);
MICRO_TEST(page_fault3, .description = "Separate file shared mapping page fault",
	   .init = mapping_init_shared_file, .run = run);
