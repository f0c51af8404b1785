/* A POSIX semaphore shared by all tasks: post then wait, an atomic on one line plus futex on contention. */
#include "../micro.h"
#include <errno.h>
#include <semaphore.h>

static int prepare(void *shared, const char *workdir, unsigned ntasks)
{
	(void)workdir;
	(void)ntasks;
	return sem_init(shared, 1, 0) ? errno : 0;
}

static void run(struct micro_task *t)
{
	for (;;) {
		sem_post(t->shared);
		MICRO_FAIL_ON(t, sem_wait(t->shared), "sem_wait");
		micro_count(t);
	}
}

MICRO_TEST(sem1, .description = "sem_post/sem_wait on one process-shared POSIX semaphore",
	   .shared_size = sizeof(sem_t), .prepare = prepare, .run = run);
