#ifndef MOSBENCH_MICRO_UNLINK_H
#define MOSBENCH_MICRO_UNLINK_H

#include "dirs.h"
#include <fcntl.h>
#include <unistd.h>

/* Create and remove: the directory's i_rwsem for write twice per iteration, as Exim's spool does. */
static inline void unlink_run(struct micro_task *t)
{
	const char *path = t->priv;
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		MICRO_FAIL_ON(t, fd < 0, "open(O_CREAT)");
		close(fd);
		MICRO_FAIL_ON(t, unlink(path), "unlink");
		micro_count(t);
	}
}

#endif
