/* FUTEX_WAKE on a per-task word nobody waits on: the futex hash bucket lookup alone. */
#include "../micro.h"
#include "futex.h"
#include <errno.h>
#include <stdlib.h>

static int init(struct micro_task *t)
{
	t->priv = calloc(1, 64);
	return t->priv ? 0 : ENOMEM;
}

static void run(struct micro_task *t)
{
	for (;;) {
		futex(t->priv, FUTEX_WAKE_PRIVATE, 1);
		micro_count(t);
	}
}

MICRO_TEST(futex1, .description = "FUTEX_WAKE on a private per-task word with no waiters", .init = init,
	   .run = run);
