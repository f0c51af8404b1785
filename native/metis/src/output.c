#include "metis/output.h"

#include <errno.h>
#include <inttypes.h>

int metis_write_result(FILE *f, const struct metis_result *r)
{
	for (size_t i = 0; i < r->npairs; i++) {
		const struct metis_pair *p = r->pairs[i];
		fwrite(p->key, 1, p->keylen, f);
		for (uint32_t v = 0; v < p->nvalues; v++)
			fprintf(f, " %" PRIu64, p->values[v]);
		fputc('\n', f);
		if (ferror(f))
			return errno ? errno : EIO;
	}
	return fflush(f) || ferror(f) ? (errno ? errno : EIO) : 0;
}
