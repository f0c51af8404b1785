/* sem_wait/sem_post on the task's own unshared POSIX semaphore: glibc's atomic fast path. */
#include "../micro.h"
#include <errno.h>
#include <semaphore.h>
#include <stdint.h>

static void run(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	sem_t sem;
	MICRO_FAIL_ON(t, sem_init(&sem, 0, 1), "sem_init");
	for (;;) {
		MICRO_FAIL_ON(t, sem_wait(&sem), "sem_wait");
		sem_post(&sem);
		micro_inc(ops);
	}
}

MICRO_TEST(posix_semaphore1, .description = "POSIX semaphores", .run = run);
