/* The two applications of the paper's Metis workload: word count and the inverted index. */
#include "metis/metis.h"

/* Calls metis_emit(word, value_of(word start)) for every word of the chunk. */
static inline void each_word(struct metis_worker *w, const char *data, size_t len, uint64_t base, bool positions)
{
	size_t i = 0;
	while (i < len) {
		while (i < len && !metis_word_char((unsigned char)data[i]))
			i++;
		size_t start = i;
		while (i < len && metis_word_char((unsigned char)data[i]))
			i++;
		if (i > start)
			metis_emit(w, data + start, (uint32_t)(i - start), positions ? base + start : 1);
	}
}

static void wc_map(struct metis_worker *w, const char *data, size_t len, uint64_t base)
{
	each_word(w, data, len, base, false);
}

static void ii_map(struct metis_worker *w, const char *data, size_t len, uint64_t base)
{
	each_word(w, data, len, base, true);
}

const struct metis_app metis_wordcount = { .name = "wordcount", .combine = METIS_SUM, .map = wc_map };
const struct metis_app metis_invindex = { .name = "invindex", .combine = METIS_LIST, .map = ii_map };
