/* Anonymous page faults: page allocation, zeroing, LRU and memcg charging, rmap. */
#include "pagefault.h"

static int init(struct micro_task *t)
{
	return pagefault_init(t, -1, MAP_PRIVATE | MAP_ANONYMOUS);
}

MICRO_TEST(page_fault1, .description = "write faults on fresh anonymous memory (one iteration = one fault)",
	   .init = init, .run = pagefault_run);
