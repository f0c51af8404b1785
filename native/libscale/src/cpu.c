#include "scale/cpu.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned scale_nr_slots(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);
	return n > 0 ? (unsigned)n : 1;
}

void *scale_alloc_lines(unsigned n, size_t size)
{
	size_t bytes = (size_t)n * size;
	void *p;

	if (n && bytes / n != size)
		return NULL;
	bytes = (bytes + SCALE_LINE - 1) / SCALE_LINE * SCALE_LINE;
	if (!bytes)
		bytes = SCALE_LINE;
	if (posix_memalign(&p, SCALE_LINE, bytes))
		return NULL;
	return memset(p, 0, bytes);
}

void scale_free(void *p)
{
	free(p);
}
