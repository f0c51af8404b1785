/* An uncontended pthread mutex per task: the user-space fast path, which must scale perfectly. */
#include "../micro.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

static int init(struct micro_task *t)
{
	/* 128-byte aligned so no two tasks' mutexes share a line. */
	pthread_mutex_t *m = aligned_alloc(128, 128);
	if (!m)
		return ENOMEM;
	pthread_mutex_init(m, NULL);
	t->priv = m;
	return 0;
}

static void run(struct micro_task *t)
{
	for (;;) {
		pthread_mutex_lock(t->priv);
		pthread_mutex_unlock(t->priv);
		micro_count(t);
	}
}

MICRO_TEST(mutex1, .description = "pthread mutex lock/unlock, one private mutex per task", .init = init,
	   .run = run);
