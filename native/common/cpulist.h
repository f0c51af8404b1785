/*
 * cpulist.h - the kernel's CPU list format ("0-3,8,10-11") for the native programs' --cpus options.
 * Header-only: each program that takes a CPU list includes it once.
 */
#ifndef MOSBENCH_CPULIST_H
#define MOSBENCH_CPULIST_H

#include <stdlib.h>

/* Parses s into a malloc'd array of CPU numbers; returns 0, or -1 for a malformed or empty list. */
static inline int cpulist_parse(const char *s, int **out, unsigned *n)
{
	size_t cap = 16, len = 0;
	int *v = malloc(cap * sizeof(*v));
	const char *p = s;

	while (v && *p) {
		char *end;
		long a = strtol(p, &end, 10), b;
		if (end == p || a < 0)
			goto bad;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p || b < a)
				goto bad;
		}
		for (long c = a; c <= b; c++) {
			if (len == cap) {
				int *nv = realloc(v, (cap *= 2) * sizeof(*v));
				if (!nv)
					goto bad;
				v = nv;
			}
			v[len++] = (int)c;
		}
		if (*end == ',')
			end++;
		else if (*end)
			goto bad;
		p = end;
	}
	if (!v || !len)
		goto bad;
	*out = v;
	*n = (unsigned)len;
	return 0;
bad:
	free(v);
	return -1;
}

#endif
