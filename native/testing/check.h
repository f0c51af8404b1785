/* check.h - the invariant check every native test uses: prints where and why, then exits 1. */
#ifndef MOSBENCH_CHECK_H
#define MOSBENCH_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

#endif
