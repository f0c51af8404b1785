/* gen.h - deterministic input for Metis: Zipf-distributed words (exponent 1) over a vocabulary. */
#ifndef METIS_GEN_H
#define METIS_GEN_H

#include <stdint.h>
#include <stdio.h>

/* Writes at least `bytes` bytes of words to f, the same for the same (seed, vocab). Returns 0 or an errno. */
int metis_generate(FILE *f, uint64_t bytes, uint64_t seed, uint32_t vocab);

#endif
