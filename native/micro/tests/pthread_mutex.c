/*
 * pthread mutex lock/unlock. The "contended" tests use one mutex in the program's data: one for all
 * tasks in thread mode, a copy per process in process mode (fork copies it), exactly as will-it-scale
 * has it, so their process form is uncontended. 3 to 5 add an update inside the critical section: a
 * global, a local and a thread-local variable.
 */
#include "../micro.h"
#include <pthread.h>
#include <stdint.h>

/*
 * The mutex and the global the critical section updates each in a 128-byte block of its own (two
 * lines, which the adjacent-line prefetcher pairs), as the linker happens to put will-it-scale's (val
 * at 0x111e0, mutex at 0x11200). Sharing one line, the update fought the waiters for the mutex's line:
 * pthread_mutex3 at two threads read 0.24x will-it-scale's.
 */
static pthread_mutex_t program_mutex __attribute__((aligned(128))) = PTHREAD_MUTEX_INITIALIZER;
static unsigned long global_value __attribute__((aligned(128)));
static _Thread_local unsigned long thread_value;

static void run_contended(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	for (;;) {
		pthread_mutex_lock(&program_mutex);
		pthread_mutex_unlock(&program_mutex);
		micro_inc(ops);
	}
}

static void run_uncontended(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
	for (;;) {
		pthread_mutex_lock(&own);
		pthread_mutex_unlock(&own);
		micro_inc(ops);
	}
}

static void run_global_update(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	for (;;) {
		pthread_mutex_lock(&program_mutex);
		global_value++;
		pthread_mutex_unlock(&program_mutex);
		micro_inc(ops);
	}
}

static void run_local_update(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	volatile unsigned long local = 0; /* in memory, as will-it-scale's alloca'd value */
	for (;;) {
		pthread_mutex_lock(&program_mutex);
		local++;
		pthread_mutex_unlock(&program_mutex);
		micro_inc(ops);
	}
}

static void run_tls_update(struct micro_task *t)
{
	_Atomic uint64_t *ops = t->iterations;
	for (;;) {
		pthread_mutex_lock(&program_mutex);
		thread_value++;
		pthread_mutex_unlock(&program_mutex);
		micro_inc(ops);
	}
}

MICRO_TEST(pthread_mutex1, .description = "Contended pthread mutex", .run = run_contended);
MICRO_TEST(pthread_mutex2, .description = "Uncontended pthread mutex", .run = run_uncontended);
MICRO_TEST(pthread_mutex3, .description = "Contended pthread mutex with global update",
	   .run = run_global_update);
MICRO_TEST(pthread_mutex4, .description = "Contended pthread mutex with local update", .run = run_local_update);
MICRO_TEST(pthread_mutex5, .description = "Contended pthread mutex with TLS update", .run = run_tls_update);
