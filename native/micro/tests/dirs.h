/*
 * Path-name tests: a file in a directory of the task's own, a file of the task's own in a directory all
 * tasks share, or one file all tasks share. The three separate per-directory locking from per-dentry
 * reference counting (the dentry and vfsmount work of the paper's sections 4.4 and 4.5).
 */
#ifndef MOSBENCH_MICRO_DIRS_H
#define MOSBENCH_MICRO_DIRS_H

#include "../micro.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum dirs_kind { DIRS_PRIVATE_DIR, DIRS_SHARED_DIR, DIRS_SHARED_FILE };

static inline int dirs_prepare(void *shared, const char *workdir, unsigned ntasks)
{
	char path[4096];
	(void)shared;
	(void)ntasks;
	int err = micro_path(path, sizeof(path), workdir, "shared.dir");
	return err ? err : (mkdir(path, 0700) ? errno : 0);
}

/* Sets t->priv to the task's file path (the file itself is not created). */
static inline int dirs_init(struct micro_task *t, enum dirs_kind kind)
{
	char path[4096];
	int err = 0;
	switch (kind) {
	case DIRS_PRIVATE_DIR:
		err = micro_path(path, sizeof(path), t->workdir, "dir.%u", t->nr);
		if (!err && mkdir(path, 0700))
			err = errno;
		if (!err)
			err = micro_path(path, sizeof(path), t->workdir, "dir.%u/file", t->nr);
		break;
	case DIRS_SHARED_DIR:
		err = micro_path(path, sizeof(path), t->workdir, "shared.dir/file.%u", t->nr);
		break;
	case DIRS_SHARED_FILE:
		err = micro_path(path, sizeof(path), t->workdir, "shared.dir/file");
		break;
	}
	if (err)
		return err;
	return (t->priv = strdup(path)) ? 0 : ENOMEM;
}

#endif
