/*
 * The job arena: large regions mapped once and carved by a bump pointer, so the many small tables of a
 * job cost no malloc lock and their pages are faulted in as the tables grow. Each worker has an arena
 * of its own (no lock); 2 MB mode asks for huge pages, first reserved ones (MAP_HUGETLB) and, when none
 * are reserved, transparent ones (madvise on 2 MB-aligned regions).
 */
#include "metis/metis.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define REGION (64UL << 20)
#define HUGE (2UL << 20)

struct region {
	struct region *next;
	char *base;
	size_t size, used;
};

struct metis_arena {
	enum metis_pages pages;
	const char *kind;
	struct region *regions;
};

struct metis_arena *metis_arena_create(enum metis_pages pages)
{
	struct metis_arena *a = calloc(1, sizeof(*a));
	if (a) {
		a->pages = pages;
		a->kind = pages == METIS_PAGES_4K ? "4k" : NULL;	/* decided by the first region */
	}
	return a;
}

static void *map_region(struct metis_arena *a, size_t size)
{
	void *p;
	if (a->pages == METIS_PAGES_4K) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			madvise(p, size, MADV_NOHUGEPAGE);	/* 4 KB means 4 KB even where THP is "always" */
		return p;
	}
	if (!a->kind || !strcmp(a->kind, "2m-hugetlb")) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED) {
			a->kind = "2m-hugetlb";
			return p;
		}
	}
	/* Transparent huge pages want 2 MB alignment: map one huge page more and trim both ends. */
	char *raw = mmap(NULL, size + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return raw;
	char *aligned = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	if (aligned > raw)
		munmap(raw, (size_t)(aligned - raw));
	munmap(aligned + size, (size_t)(raw + size + HUGE - (aligned + size)));
	madvise(aligned, size, MADV_HUGEPAGE);
	a->kind = "2m-thp";
	return aligned;
}

void *metis_arena_alloc(struct metis_arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	struct region *r = a->regions;
	if (!r || r->size - r->used < size) {
		size_t want = size > REGION ? (size + HUGE - 1) & ~(HUGE - 1) : REGION;
		void *base = map_region(a, want);
		if (base == MAP_FAILED)
			return NULL;
		if (!(r = malloc(sizeof(*r)))) {
			munmap(base, want);
			return NULL;
		}
		*r = (struct region){ .next = a->regions, .base = base, .size = want, .used = 0 };
		a->regions = r;
	}
	void *p = r->base + r->used;
	r->used += size;
	return p;
}

void metis_arena_destroy(struct metis_arena *a)
{
	if (!a)
		return;
	for (struct region *r = a->regions, *next; r; r = next) {
		next = r->next;
		munmap(r->base, r->size);
		free(r);
	}
	free(a);
}

const char *metis_arena_kind(const struct metis_arena *a)
{
	return a->kind ? a->kind : "2m";
}
