/*
 * The paper's per-core and lock-free structures, each raced stock against scalable:
 *   dentry     every task looks up one shared entry (a common parent such as /usr) and puts it;
 *   mount      every task looks up random keys of a 64-entry mount table;
 *   openlist   every task adds a file to the open-file list and removes it (open + close);
 *   freelist   every task allocates 4 buffers and frees them (the packet-buffer pool);
 *   falseshare every task reads an object's read-mostly fields and bumps its own counter in it.
 */
#include "bench.h"
#include "scale/falseshare.h"
#include "scale/freelist.h"
#include "scale/lfcmp.h"
#include "scale/pcache.h"
#include "scale/pclist.h"

#include <errno.h>
#include <stdlib.h>

#define MOUNTS 64
#define BUFFERS_PER_TASK 64
#define BURST 4

struct structures {
	struct ldentry dentry;
	struct ldentry_name name;
	struct pcache mounts;
	struct lock_list stock_list;
	struct pclist lists;
	struct global_freelist global_pool;
	struct pc_freelist pool;
	struct fs_packed *packed;
	struct fs_split_ro split_ro;
	struct fs_split_hot *split_hot;
};

static int prepare(void *shared, const char *workdir, unsigned ntasks)
{
	struct structures *s = shared;
	(void)workdir;
	if (!ldentry_name_set(&s->name, 2, "usr") || ldentry_init(&s->dentry, &s->name, 16) ||
	    pcache_init(&s->mounts, 16) || pclist_init(&s->lists) || pc_freelist_init(&s->pool, 16))
		return ENOMEM;
	for (uint64_t k = 0; k < MOUNTS; k++)
		if (pcache_insert(&s->mounts, k, k * 7))
			return ENOMEM;
	lock_list_init(&s->stock_list);
	global_freelist_init(&s->global_pool);
	/* Every task's buffers go on both pools up front; the pools never run dry. */
	size_t nbuf = (size_t)ntasks * BUFFERS_PER_TASK;
	struct fl_obj *bufs = calloc(2 * nbuf, 256);
	if (!bufs)
		return ENOMEM;
	for (size_t i = 0; i < nbuf; i++) {
		global_freelist_free(&s->global_pool, (struct fl_obj *)((char *)bufs + i * 256));
		pc_freelist_free(&s->pool, (struct fl_obj *)((char *)bufs + (nbuf + i) * 256));
	}
	s->packed = bench_alloc(sizeof(*s->packed) * (ntasks / FS_PACKED_WRITERS + 1));
	s->split_hot = bench_alloc(sizeof(*s->split_hot) * ntasks);
	if (!s->packed || !s->split_hot)
		return ENOMEM;
	for (unsigned i = 0; i <= ntasks / FS_PACKED_WRITERS; i++)
		s->packed[i] = (struct fs_packed){ .flags = 1, .ops = 2 };
	s->split_ro = (struct fs_split_ro){ .flags = 1, .ops = 2 };
	return 0;
}

static void fail_if(struct micro_task *t, bool bad, const char *what)
{
	if (bad)
		micro_fail(t, what, 0);
}

static void run_dentry_stock(struct micro_task *t)
{
	struct structures *s = t->shared;
	for (;;) {
		fail_if(t, !ldentry_get_locked(&s->dentry, &s->name), "lookup missed");
		ldentry_put_locked(&s->dentry);
		micro_count(t);
	}
}

static void run_dentry_scalable(struct micro_task *t)
{
	struct structures *s = t->shared;
	for (;;) {
		fail_if(t, !ldentry_get_lockfree(&s->dentry, &s->name), "lookup missed");
		ldentry_put_lockfree(&s->dentry);
		micro_count(t);
	}
}

static void run_mount(struct micro_task *t, bool cached)
{
	struct structures *s = t->shared;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (t->nr + 1), v;
	for (;;) {
		uint64_t k = bench_rand(&rng) % MOUNTS;
		bool found = cached ? pcache_lookup(&s->mounts, k, &v) : pcache_lookup_central(&s->mounts, k, &v);
		fail_if(t, !found || v != k * 7, "mount lookup returned a wrong answer");
		micro_count(t);
	}
}

static void run_mount_stock(struct micro_task *t)
{
	run_mount(t, false);
}

static void run_mount_scalable(struct micro_task *t)
{
	run_mount(t, true);
}

static void run_openlist_stock(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct pclist_node node;
	for (;;) {
		lock_list_add(&s->stock_list, &node);
		lock_list_del(&s->stock_list, &node);
		micro_count(t);
	}
}

static void run_openlist_scalable(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct pclist_node node;
	for (;;) {
		pclist_add(&s->lists, &node);
		pclist_del(&s->lists, &node);
		micro_count(t);
	}
}

static void run_freelist_stock(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct fl_obj *held[BURST];
	for (;;) {
		for (int i = 0; i < BURST; i++)
			fail_if(t, !(held[i] = global_freelist_alloc(&s->global_pool)), "pool empty");
		for (int i = 0; i < BURST; i++)
			global_freelist_free(&s->global_pool, held[i]);
		micro_count(t);
	}
}

static void run_freelist_scalable(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct fl_obj *held[BURST];
	for (;;) {
		for (int i = 0; i < BURST; i++)
			fail_if(t, !(held[i] = pc_freelist_alloc(&s->pool)), "pool empty");
		for (int i = 0; i < BURST; i++)
			pc_freelist_free(&s->pool, held[i]);
		micro_count(t);
	}
}

static void run_falseshare_stock(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct fs_packed *o = &s->packed[t->nr / FS_PACKED_WRITERS];
	long seen = 0;
	for (;;) {
		seen += fs_packed_use(o, t->nr % FS_PACKED_WRITERS);
		micro_count(t);
		fail_if(t, seen < 0, "read-mostly fields changed");
	}
}

static void run_falseshare_scalable(struct micro_task *t)
{
	struct structures *s = t->shared;
	struct fs_split_hot *mine = &s->split_hot[t->nr];
	long seen = 0;
	for (;;) {
		seen += fs_split_use(&s->split_ro, mine);
		micro_count(t);
		fail_if(t, seen < 0, "read-mostly fields changed");
	}
}

#define STRUCTURE(id, name, what, fn)                                                                  \
	MICRO_TEST_NAMED(id, name, .description = what, .shared_size = sizeof(struct structures),       \
			 .threads_only = true, .prepare = prepare, .run = fn)

STRUCTURE(dentry_stock, "dentry/stock", "compare under the dentry's spinlock, count under it",
	  run_dentry_stock);
STRUCTURE(dentry_scalable, "dentry/scalable", "lock-free comparison, sloppy reference count",
	  run_dentry_scalable);
STRUCTURE(mount_stock, "mount/stock", "central mount table under one spinlock", run_mount_stock);
STRUCTURE(mount_scalable, "mount/scalable", "per-core caches over the central table", run_mount_scalable);
STRUCTURE(openlist_stock, "openlist/stock", "one open-file list under one lock", run_openlist_stock);
STRUCTURE(openlist_scalable, "openlist/scalable", "per-core open-file lists", run_openlist_scalable);
STRUCTURE(freelist_stock, "freelist/stock", "one free list under one lock", run_freelist_stock);
STRUCTURE(freelist_scalable, "freelist/scalable", "per-core free lists over a global one",
	  run_freelist_scalable);
STRUCTURE(falseshare_stock, "falseshare/stock", "hot counters on the read-mostly fields' cache line",
	  run_falseshare_stock);
STRUCTURE(falseshare_scalable, "falseshare/scalable", "hot counters and read-mostly fields on separate lines",
	  run_falseshare_scalable);
