/*
 * Path-name tests, in will-it-scale's layouts: the task's own file in a directory all tasks share
 * ("Separate file"), the task's own file in a directory of its own ("in different directories"), or
 * one file for all ("Same file"). The three separate per-directory locking from per-dentry reference
 * counting (the paper's dentry and vfsmount work, sections 4.4 and 4.5). t->priv holds the path.
 */
#ifndef MOSBENCH_MICRO_PATH_H
#define MOSBENCH_MICRO_PATH_H

#include "../micro.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum path_layout { PATH_OWN_FILE, PATH_OWN_DIR, PATH_SAME_FILE };

/* Sets t->priv to the task's path; makes its directory (own-dir layout) but not the file. */
static inline int path_init(struct micro_task *t, enum path_layout layout)
{
	char path[4096];
	int err = 0;
	switch (layout) {
	case PATH_OWN_FILE:
		err = micro_path(path, sizeof(path), t->workdir, "file.%u", t->nr);
		break;
	case PATH_OWN_DIR:
		err = micro_path(path, sizeof(path), t->workdir, "dir.%u", t->nr);
		if (!err && mkdir(path, 0700))
			err = errno;
		if (!err)
			err = micro_path(path, sizeof(path), t->workdir, "dir.%u/file", t->nr);
		break;
	case PATH_SAME_FILE:
		err = micro_path(path, sizeof(path), t->workdir, "same");
		break;
	}
	if (err)
		return err;
	return (t->priv = strdup(path)) ? 0 : ENOMEM;
}

/* As path_init, and the file exists before the start gate. */
static inline int path_init_existing(struct micro_task *t, enum path_layout layout)
{
	int err = path_init(t, layout);
	if (err)
		return err;
	int fd = open(t->priv, O_RDWR | O_CREAT, 0600);
	if (fd < 0)
		return errno;
	return close(fd) ? errno : 0;
}

#endif
