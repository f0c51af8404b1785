/* output.h - the text form of a Metis result: "key value value ...\n" per key, in key order. */
#ifndef METIS_OUTPUT_H
#define METIS_OUTPUT_H

#include "metis/metis.h"

#include <stdio.h>

/* Returns 0 or an errno (a full disk shows here). */
int metis_write_result(FILE *f, const struct metis_result *r);

#endif
