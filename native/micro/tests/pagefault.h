/*
 * The page fault tests share one loop: map a region, write one byte per page, unmap. An iteration is
 * one page fault, so the three forms (anonymous, private file, shared file) compare directly.
 */
#ifndef MOSBENCH_MICRO_PAGEFAULT_H
#define MOSBENCH_MICRO_PAGEFAULT_H

#include "../micro.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* 32 MB per task keeps 256 tasks' files within 8 GB of tmpfs. */
#define PAGEFAULT_SIZE (32UL << 20)
#define PAGEFAULT_PAGE 4096UL

struct pagefault_state {
	int fd;
	int flags;
};

static inline int pagefault_init(struct micro_task *t, int fd, int flags)
{
	struct pagefault_state *s = malloc(sizeof(*s));
	if (!s)
		return ENOMEM;
	s->fd = fd;
	s->flags = flags;
	t->priv = s;
	return 0;
}

static inline int pagefault_file_init(struct micro_task *t, int flags)
{
	char path[4096];
	int err = micro_path(path, sizeof(path), t->workdir, "pagefault.%u", t->nr);
	if (err || (err = micro_make_file(path, PAGEFAULT_SIZE)))
		return err;
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return errno;
	return pagefault_init(t, fd, flags);
}

static inline void pagefault_run(struct micro_task *t)
{
	const struct pagefault_state *s = t->priv;
	for (;;) {
		char *p = mmap(NULL, PAGEFAULT_SIZE, PROT_READ | PROT_WRITE, s->flags, s->fd, 0);
		MICRO_FAIL_ON(t, p == MAP_FAILED, "mmap");
		for (unsigned long off = 0; off < PAGEFAULT_SIZE; off += PAGEFAULT_PAGE) {
			p[off] = 1;
			micro_count(t);
		}
		munmap(p, PAGEFAULT_SIZE);
	}
}

#endif
