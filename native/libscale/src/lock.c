#include "scale/lock.h"

#include <string.h>

static int ticket_init(void *l)
{
	*(struct ticket_lock *)l = (struct ticket_lock)TICKET_LOCK_INITIALIZER;
	return 0;
}

static void nothing(void *l)
{
	(void)l;
}

static void ticket_lock(void *l, void *node)
{
	(void)node;
	ticket_lock_lock(l);
}

static void ticket_unlock(void *l, void *node)
{
	(void)node;
	ticket_lock_unlock(l);
}

const struct scale_lock_ops scale_ticket_lock_ops = {
	.name = "ticket", .size = sizeof(struct ticket_lock), .node_size = 0,
	.init = ticket_init, .destroy = nothing, .lock = ticket_lock, .unlock = ticket_unlock,
};

static int mcs_init(void *l)
{
	*(struct mcs_lock *)l = (struct mcs_lock)MCS_LOCK_INITIALIZER;
	return 0;
}

static void mcs_lock(void *l, void *node)
{
	mcs_lock_lock(l, node);
}

static void mcs_unlock(void *l, void *node)
{
	mcs_lock_unlock(l, node);
}

const struct scale_lock_ops scale_mcs_lock_ops = {
	.name = "mcs", .size = sizeof(struct mcs_lock), .node_size = sizeof(struct mcs_node),
	.init = mcs_init, .destroy = nothing, .lock = mcs_lock, .unlock = mcs_unlock,
};

static int mutex_init(void *l)
{
	return pthread_mutex_init(l, NULL);
}

static void mutex_destroy(void *l)
{
	pthread_mutex_destroy(l);
}

static void mutex_lock(void *l, void *node)
{
	(void)node;
	pthread_mutex_lock(l);
}

static void mutex_unlock(void *l, void *node)
{
	(void)node;
	pthread_mutex_unlock(l);
}

const struct scale_lock_ops scale_mutex_lock_ops = {
	.name = "mutex", .size = sizeof(pthread_mutex_t), .node_size = 0,
	.init = mutex_init, .destroy = mutex_destroy, .lock = mutex_lock, .unlock = mutex_unlock,
};

const struct scale_lock_ops *const scale_lock_kinds[] = {
	&scale_ticket_lock_ops, &scale_mcs_lock_ops, &scale_mutex_lock_ops, NULL,
};

const struct scale_lock_ops *scale_lock_find(const char *name)
{
	for (const struct scale_lock_ops *const *k = scale_lock_kinds; *k; k++)
		if (!strcmp((*k)->name, name))
			return *k;
	return NULL;
}
