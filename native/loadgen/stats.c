#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int load_stats_create(struct load_stats *s, const char *path, unsigned nthreads)
{
	char tmp[4096];
	int fd = -1;
	s->size = LOAD_SLOTS_OFFSET + (size_t)nthreads * LOAD_SLOT_STRIDE;
	if (path) {
		if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
			return ENAMETOOLONG;
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			return errno;
		if (ftruncate(fd, (off_t)s->size)) {
			int err = errno;
			close(fd);
			unlink(tmp);
			return err;
		}
	}
	s->hdr = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
	int err = s->hdr == MAP_FAILED ? errno : 0;
	if (fd >= 0)
		close(fd);
	if (err) {
		if (path)
			unlink(tmp);
		return err;
	}
	memcpy(s->hdr->magic, LOAD_MAGIC, 8);
	s->hdr->version = LOAD_VERSION;
	s->hdr->nthreads = nthreads;
	s->hdr->slot_stride = LOAD_SLOT_STRIDE;
	s->hdr->slots_offset = LOAD_SLOTS_OFFSET;
	s->hdr->ncounters = LC_COUNT;
	if (path && rename(tmp, path)) {
		err = errno;
		unlink(tmp);
		return err;
	}
	return 0;
}

_Atomic uint64_t *load_counter(const struct load_stats *s, unsigned thread, enum load_counter c)
{
	char *slot = (char *)s->hdr + LOAD_SLOTS_OFFSET + (size_t)thread * LOAD_SLOT_STRIDE;
	return (_Atomic uint64_t *)slot + c;
}

void load_add(const struct load_stats *s, unsigned thread, enum load_counter c, uint64_t n)
{
	/* One writer per slot: a relaxed load and store, no locked instruction on the hot path. */
	_Atomic uint64_t *p = load_counter(s, thread, c);
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n, memory_order_relaxed);
}

void load_fail(const struct load_stats *s, const char *fmt, ...)
{
	/* The message is written before the state says FAILED, so a reader that sees FAILED sees it. */
	uint32_t unclaimed = 0;
	if (!atomic_compare_exchange_strong(&s->hdr->fail_claimed, &unclaimed, 1))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->hdr->fail_what, sizeof(s->hdr->fail_what), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", s->hdr->fail_what);
	atomic_store(&s->hdr->state, LOAD_FAILED);
}
