/*
 * Concurrency Kit's ticket and MCS locks in the same lock benchmark, so ours are measured against a
 * well-known implementation side by side (Debian's libck-dev; header-only for these locks).
 */
#include "bench.h"
#include "scale/lock.h"

#include <ck_spinlock.h>

static int ck_ticket_init(void *l)
{
	ck_spinlock_ticket_init(l);
	return 0;
}

static void ck_ticket_lock(void *l, void *node)
{
	(void)node;
	ck_spinlock_ticket_lock(l);
}

static void ck_ticket_unlock(void *l, void *node)
{
	(void)node;
	ck_spinlock_ticket_unlock(l);
}

static int ck_mcs_init(void *l)
{
	ck_spinlock_mcs_init(l);
	return 0;
}

static void ck_mcs_lock(void *l, void *node)
{
	ck_spinlock_mcs_lock(l, node);
}

static void ck_mcs_unlock(void *l, void *node)
{
	ck_spinlock_mcs_unlock(l, node);
}

static void nothing(void *l)
{
	(void)l;
}

const struct scale_lock_ops bench_ck_ticket_ops = {
	.name = "ck-ticket", .size = sizeof(ck_spinlock_ticket_t), .node_size = 0, .init = ck_ticket_init,
	.destroy = nothing, .lock = ck_ticket_lock, .unlock = ck_ticket_unlock,
};

const struct scale_lock_ops bench_ck_mcs_ops = {
	.name = "ck-mcs", .size = sizeof(ck_spinlock_mcs_t), .node_size = sizeof(ck_spinlock_mcs_context_t),
	.init = ck_mcs_init, .destroy = nothing, .lock = ck_mcs_lock, .unlock = ck_mcs_unlock,
};
