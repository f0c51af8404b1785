/* mmap/munmap of 128 MB, never touched: VMA tree insert and remove under mmap_lock for write. */
#include "mapping.h"

static void run(struct micro_task *t)
{
	const struct mapping *m = t->priv;
	for (;;) {
		munmap(mapping_map(t, m), m->size);
		micro_count(t);
	}
}

MICRO_TEST(mmap1, .description = "Anonymous memory mmap/munmap of 128MB", .init = mapping_init_anon, .run = run);
MICRO_TEST(mmap2, .description = "Separate file mmap/munmap of 128MB", .init = mapping_init_private_file,
	   .run = run);
