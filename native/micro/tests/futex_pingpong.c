/* mosbench's own: futex wait/wake ping-pong with a partner on the same CPU, sleeping and waking. */
#include "../micro.h"
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TURN_STRIDE 128

struct turn {
	struct micro_task *task;
	_Atomic uint32_t word; /* 0: the task's turn, 1: the partner's */
};

static void futex(_Atomic uint32_t *w, int op, uint32_t val)
{
	syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

static void wait_for(_Atomic uint32_t *w, uint32_t want)
{
	uint32_t v;
	while ((v = atomic_load(w)) != want)
		futex(w, FUTEX_WAIT, v);
}

static void hand_over(_Atomic uint32_t *w, uint32_t to)
{
	atomic_store(w, to);
	futex(w, FUTEX_WAKE, 1);
}

static void partner(void *arg)
{
	struct turn *tn = arg;
	for (;;) {
		wait_for(&tn->word, 1);
		hand_over(&tn->word, 0);
	}
}

static int init(struct micro_task *t)
{
	/* In the shared area, so a partner process sees the same word (a shared, not private, futex). */
	struct turn *tn = (struct turn *)((char *)t->shared + (size_t)t->nr * TURN_STRIDE);
	tn->task = t;
	atomic_store(&tn->word, 0);
	t->priv = tn;
	return micro_spawn_partner(t, partner, tn);
}

static void run(struct micro_task *t)
{
	struct turn *tn = t->priv;
	for (;;) {
		hand_over(&tn->word, 1);
		wait_for(&tn->word, 0);
		micro_count(t);
	}
}

MICRO_TEST(futex_pingpong, .description = "mosbench: futex wait/wake ping-pong with a partner on the same CPU "
	   "(round trips)", .shared_size = TURN_STRIDE * 4096, .init = init, .run = run);
