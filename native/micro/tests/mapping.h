/* Mapping tests: 128 MB regions, anonymous or of the task's own unlinked, truncated-to-size file. */
#ifndef MOSBENCH_MICRO_MAPPING_H
#define MOSBENCH_MICRO_MAPPING_H

#include "file.h"
#include <stdlib.h>
#include <sys/mman.h>

#define MAPPING_SIZE (128UL << 20)

struct mapping {
	int fd;		/* -1: anonymous */
	int flags;	/* MAP_PRIVATE or MAP_SHARED, with MAP_ANONYMOUS when fd is -1 */
	size_t size;
};

static inline int mapping_init(struct micro_task *t, int fd, int flags, size_t size)
{
	int err = micro_fence_mappings(size);
	if (err)
		return err;
	struct mapping *m = malloc(sizeof(*m));
	if (!m)
		return ENOMEM;
	*m = (struct mapping){ fd, flags, size };
	t->priv = m;
	return 0;
}

/* The task's own sparse file of the mapping's size (will-it-scale: mkstemp, ftruncate, unlink). */
static inline int mapping_init_file(struct micro_task *t, int flags)
{
	int fd, err = micro_tmpfile(t->workdir, 0, &fd);
	if (err)
		return err;
	if (ftruncate(fd, (off_t)MAPPING_SIZE)) {
		err = errno;
		close(fd);
		return err;
	}
	return mapping_init(t, fd, flags, MAPPING_SIZE);
}

static inline char *mapping_map(struct micro_task *t, const struct mapping *m)
{
	char *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, m->flags, m->fd, 0);
	MICRO_FAIL_ON(t, p == MAP_FAILED, "mmap");
	return p;
}

static inline int mapping_init_anon(struct micro_task *t)
{
	return mapping_init(t, -1, MAP_PRIVATE | MAP_ANONYMOUS, MAPPING_SIZE);
}

static inline int mapping_init_private_file(struct micro_task *t)
{
	return mapping_init_file(t, MAP_PRIVATE);
}

static inline int mapping_init_shared_file(struct micro_task *t)
{
	return mapping_init_file(t, MAP_SHARED);
}

#endif
