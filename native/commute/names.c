/*
 * Files and names: open, link, unlink, rename and stat on names in one directory (or one per task).
 *
 * Each object is an empty file with its name in the situation's directory, a second link to it in k/
 * (unlink's undo links the name back from it, so the file never goes) and a name beside it that does
 * not exist (where link, rename and an exclusive create put their new name). Every file thus has two
 * links at rest.
 */
#include "commute.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct name_obj {
	char name[COMMUTE_PATH];
	char hidden[COMMUTE_PATH];
	char fresh[COMMUTE_PATH];
	/* Both roles work on it: a result the other's call causes (EEXIST, ENOENT) is a result, not a failure. */
	bool shared;
};

struct names_situation {
	const struct commute_op *op[2];
	bool same;	/* role 1 works on role 0's object */
	bool diffdir;	/* a directory per object, not one for all */
};

/* prepare's objects, 2 per pair; threads and forked tasks see them as they were. */
static struct name_obj *name_objs;

static int make_dir(const char *workdir, const char *name)
{
	char path[COMMUTE_PATH];
	int err = micro_path(path, sizeof(path), workdir, "%s", name);
	return err ? err : mkdir(path, 0700) ? errno : 0;
}

static int make_name_obj(struct name_obj *o, const char *workdir, const char *dir, unsigned p, unsigned r)
{
	int err = micro_path(o->name, sizeof(o->name), workdir, "%s/f.%u.%u", dir, p, r);
	if (!err)
		err = micro_path(o->hidden, sizeof(o->hidden), workdir, "k/f.%u.%u", p, r);
	if (!err)
		err = micro_path(o->fresh, sizeof(o->fresh), workdir, "%s/n.%u.%u", dir, p, r);
	if (!err)
		err = micro_make_file(o->name, 0);
	return err ? err : link(o->name, o->hidden) ? errno : 0;
}

static int names_prepare(const struct names_situation *s, const char *workdir, unsigned ntasks)
{
	unsigned n = commute_nobjs(ntasks);
	int err = make_dir(workdir, "k");
	if (!err && !s->diffdir)
		err = make_dir(workdir, "d");
	if (!err && !(name_objs = calloc(n, sizeof(*name_objs))))
		err = ENOMEM;
	for (unsigned i = 0; i < n && !err; i++) {
		char dir[32] = "d";
		if (s->diffdir) {
			snprintf(dir, sizeof(dir), "d.%u.%u", i / 2, i % 2);
			err = make_dir(workdir, dir);
		}
		if (!err)
			err = make_name_obj(&name_objs[i], workdir, dir, i / 2, i % 2);
	}
	return err;
}

static int names_init(const struct names_situation *s, struct micro_task *t)
{
	unsigned role;
	struct name_obj *o = commute_adopt(t, s->op, s->same, name_objs, sizeof(*name_objs), &role);
	if (!o)
		return ENOMEM;
	o->shared = s->same;
	return 0;
}

/* open (+close): the file read-only, a lookup and a new descriptor. */
static void name_open(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	commute_open_close(t, o->name);
}

/* open(O_CREAT | O_EXCL) of the absent name (+close, +unlink if it created the file). */
static void name_create(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	int fd = open(o->fresh, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		/* Beside B's link of the same name, EEXIST is the result of coming second. */
		MICRO_FAIL_ON(t, !o->shared || errno != EEXIST, "open O_CREAT|O_EXCL");
		return;
	}
	MICRO_FAIL_ON(t, close(fd), "close (undo of open)");
	MICRO_FAIL_ON(t, unlink(o->fresh), "unlink (undo of open O_CREAT)");
}

/* link to the absent name (+unlink of it). */
static void name_link(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	MICRO_FAIL_ON(t, link(o->name, o->fresh), "link");
	MICRO_FAIL_ON(t, unlink(o->fresh), "unlink (undo of link)");
}

/* unlink of the file's name (+link back from k/). */
static void name_unlink(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	MICRO_FAIL_ON(t, unlink(o->name), "unlink");
	MICRO_FAIL_ON(t, link(o->hidden, o->name), "link (undo of unlink)");
}

/*
 * unlink of the absent name once linked there from k/: the rest state is the create's (the name
 * absent), so the two can meet on one name with neither having to fail alone.
 */
static void name_unlink_fresh(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	if (link(o->hidden, o->fresh)) {
		MICRO_FAIL_ON(t, !o->shared || errno != EEXIST, "link (before unlink)");
		return;
	}
	MICRO_FAIL_ON(t, unlink(o->fresh), "unlink");
}

/* rename to the absent name (+rename back). */
static void name_rename(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	MICRO_FAIL_ON(t, rename(o->name, o->fresh), "rename");
	MICRO_FAIL_ON(t, rename(o->fresh, o->name), "rename (undo of rename)");
}

static void name_stat(struct micro_task *t, void *p)
{
	const struct name_obj *o = p;
	struct stat st;
	/* Beside an unlink of the same name, ENOENT is the result of coming second. */
	if (stat(o->name, &st))
		MICRO_FAIL_ON(t, !o->shared || errno != ENOENT, "stat");
}

static const struct commute_op n_open = { name_open, 0 }, n_create = { name_create, 0 },
				n_link = { name_link, 0 }, n_unlink = { name_unlink, 0 },
				n_unlink_fresh = { name_unlink_fresh, 0 }, n_rename = { name_rename, 0 },
				n_stat = { name_stat, 0 };

#define NAMES(id, name, verdict, mode, state, why, ...) \
	COMMUTE_SITUATION(names, id, name, verdict, mode, state, why, __VA_ARGS__)

/* The state texts' common part: every file also has a second link in another directory (k/). */
#define ONEDIR "one directory with a file per task (each also linked from a second directory)"
#define ONEDIR_PAIR "one directory with a file per pair (also linked from a second directory)"

NAMES(open_open_threads, "open-open/diffname-threads", conflicts, threads,
      "one process; " ONEDIR "; A and B each open their own file read-only and close the descriptor",
      "one descriptor table: POSIX returns the lowest free descriptor, so which number each open returns "
      "depends on the order (COMMUTER's famous case)",
      .op = { &n_open, &n_open });
NAMES(open_open_procs, "open-open/diffname-procs", commutes, procs,
      "one process per task; " ONEDIR "; A and B each open their own file read-only and close the descriptor",
      "separate descriptor tables and different names: each open returns the same descriptor in either order",
      .op = { &n_open, &n_open });
NAMES(open_open_samename, "open-open/samename-procs", commutes, procs,
      "one process per task; " ONEDIR_PAIR "; A and B each open the same file read-only and close the "
      "descriptor",
      "separate descriptor tables, and a read-only open of an existing file changes nothing the other open "
      "returns",
      .op = { &n_open, &n_open }, .same = true);
NAMES(open_link, "open-link/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A opens its own file read-only and closes it, B links its own file to a new "
      "name in the directory and unlinks that name",
      "different names, and link allocates no descriptor: both results and the directory's final contents "
      "are the same in either order",
      .op = { &n_open, &n_link });
NAMES(open_unlink, "open-unlink/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A opens its own file read-only and closes it, B unlinks its own file's name "
      "and links it back from the second directory",
      "different names: the results and the directory's final contents are the same in either order",
      .op = { &n_open, &n_unlink });
NAMES(open_unlink_samename, "open-unlink/samename-excl", conflicts, threads,
      "one process; one directory with an absent name per pair, and a file in a second directory; A creates "
      "the name with open(O_CREAT|O_EXCL), closes it and unlinks it if it created it; B links the file to "
      "the name and, if that succeeded, unlinks the name (the counted unlink)",
      "the same name: the exclusive create fails with EEXIST while the name exists and succeeds after the "
      "unlink, and the unlink removes whichever file holds the name, so results depend on the order",
      .op = { &n_create, &n_unlink_fresh }, .same = true);
NAMES(open_rename, "open-rename/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A opens its own file read-only and closes it, B renames its own file to a new "
      "name in the directory and back",
      "different names: open never looks up B's names, so results and directory contents are the same in "
      "either order",
      .op = { &n_open, &n_rename });
NAMES(open_stat, "open-stat/samefile", commutes, threads,
      "one process; " ONEDIR_PAIR "; A opens the file read-only and closes it, B stats it by its name",
      "a read-only open of an existing file changes nothing stat returns (size, link count and times stay)",
      .op = { &n_open, &n_stat }, .same = true);
NAMES(link_link, "link-link/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A and B each link their own file to a new name in the directory and unlink "
      "that name",
      "different files and different new names: both links succeed and each file's link count is its own",
      .op = { &n_link, &n_link });
NAMES(link_unlink, "link-unlink/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A links its own file to a new name and unlinks that name, B unlinks its own "
      "file's name and links it back from the second directory",
      "different names and files: each result and the directory's final contents are the same in either "
      "order",
      .op = { &n_link, &n_unlink });
NAMES(link_stat_samefile, "link-stat/samefile", conflicts, threads,
      "one process; " ONEDIR_PAIR "; A links the file to a new name and unlinks that name, B stats the file "
      "by its name",
      "the same file: link raises st_nlink from 2 to 3 (and sets st_ctime), so what stat returns depends on "
      "whether the link came first",
      .op = { &n_link, &n_stat }, .same = true);
NAMES(link_stat, "link-stat/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A links its own file to a new name and unlinks that name, B stats its own "
      "file",
      "different files: the link changes only A's file's link count, which B's stat does not return",
      .op = { &n_link, &n_stat });
NAMES(unlink_unlink, "unlink-unlink/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A and B each unlink their own file's name and link it back from the second "
      "directory",
      "different names: both unlinks succeed and the directory ends the same in either order",
      .op = { &n_unlink, &n_unlink });
NAMES(unlink_unlink_diffdir, "unlink-unlink/diffname-diffdir", commutes, threads,
      "one process; a directory per task holding its file (also linked from a shared second directory); A "
      "and B each unlink their own file's name and link it back from the second directory",
      "different names in different directories: nothing either unlink reads is written by the other",
      .op = { &n_unlink, &n_unlink }, .diffdir = true);
NAMES(unlink_rename, "unlink-rename/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A unlinks its own file's name and links it back from the second directory, "
      "B renames its own file to a new name in the directory and back",
      "different names: each result and the directory's final contents are the same in either order",
      .op = { &n_unlink, &n_rename });
NAMES(unlink_stat_samename, "unlink-stat/samename", conflicts, threads,
      "one process; " ONEDIR_PAIR "; A unlinks the file's name and links it back from the second directory, "
      "B stats the file by that name",
      "the same name: stat succeeds before the unlink and fails with ENOENT after it",
      .op = { &n_unlink, &n_stat }, .same = true);
NAMES(rename_rename, "rename-rename/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A and B each rename their own file to a new name in the directory and back",
      "different source and target names: both renames succeed and the directory ends the same in either "
      "order",
      .op = { &n_rename, &n_rename });
NAMES(rename_rename_diffdir, "rename-rename/diffname-diffdir", commutes, threads,
      "one process; a directory per task holding its file; A and B each rename their own file to a new "
      "name in its directory and back",
      "different names in different directories: nothing either rename reads is written by the other",
      .op = { &n_rename, &n_rename }, .diffdir = true);
NAMES(rename_stat, "rename-stat/diffname-samedir", commutes, threads,
      "one process; " ONEDIR "; A renames its own file to a new name in the directory and back, B stats its "
      "own file",
      "different names: B's name and file are untouched by the rename",
      .op = { &n_rename, &n_stat });
NAMES(stat_stat, "stat-stat/samefile", commutes, threads,
      "one process; " ONEDIR_PAIR "; A and B each stat the file by its name",
      "stat only reads: both return the same in either order",
      .op = { &n_stat, &n_stat }, .same = true);
