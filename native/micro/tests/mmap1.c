/* mmap/munmap without touching: VMA tree insert and remove under mmap_lock for write. */
#include "../micro.h"
#include <errno.h>
#include <sys/mman.h>

#define SIZE (128UL << 20)

static void run(struct micro_task *t)
{
	for (;;) {
		void *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		MICRO_FAIL_ON(t, p == MAP_FAILED, "mmap");
		munmap(p, SIZE);
		micro_count(t);
	}
}

MICRO_TEST(mmap1, .description = "mmap/munmap of 128 MB anonymous memory, untouched", .run = run);
