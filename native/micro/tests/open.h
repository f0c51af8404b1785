#ifndef MOSBENCH_MICRO_OPEN_H
#define MOSBENCH_MICRO_OPEN_H

#include "dirs.h"
#include <fcntl.h>
#include <unistd.h>

/* The file exists before the gate, so the loop measures lookup, open and close, not creation. */
static inline int open_init(struct micro_task *t, enum dirs_kind kind)
{
	int err = dirs_init(t, kind);
	if (err)
		return err;
	int fd = open(t->priv, O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return errno;
	return close(fd) ? errno : 0;
}

static inline void open_run(struct micro_task *t)
{
	const char *path = t->priv;
	for (;;) {
		int fd = open(path, O_RDWR);
		MICRO_FAIL_ON(t, fd < 0, "open");
		close(fd);
		micro_count(t);
	}
}

#endif
