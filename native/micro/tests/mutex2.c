/* One process-shared pthread mutex for all tasks: contention, futex sleeps and the lock's cache line. */
#include "../micro.h"
#include <pthread.h>

static int prepare(void *shared, const char *workdir, unsigned ntasks)
{
	pthread_mutexattr_t a;
	(void)workdir;
	(void)ntasks;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	int err = pthread_mutex_init(shared, &a);
	pthread_mutexattr_destroy(&a);
	return err;
}

static void run(struct micro_task *t)
{
	for (;;) {
		pthread_mutex_lock(t->shared);
		pthread_mutex_unlock(t->shared);
		micro_count(t);
	}
}

MICRO_TEST(mutex2, .description = "pthread mutex lock/unlock, one mutex shared by all tasks",
	   .shared_size = sizeof(pthread_mutex_t), .prepare = prepare, .run = run);
