#include "scale/pclist.h"

#include <errno.h>

static void head_init(struct pclist_head *h)
{
	h->lock = (struct scale_spinlock)SCALE_SPINLOCK_INITIALIZER;
	h->anchor.next = h->anchor.prev = &h->anchor;
	h->count = 0;
}

static void link_node(struct pclist_head *h, struct pclist_node *n, unsigned home)
{
	scale_spin_lock(&h->lock);
	n->home = home;
	n->next = h->anchor.next;
	n->prev = &h->anchor;
	h->anchor.next->prev = n;
	h->anchor.next = n;
	h->count++;
	scale_spin_unlock(&h->lock);
}

static void unlink_node(struct pclist_head *h, struct pclist_node *n)
{
	scale_spin_lock(&h->lock);
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
	h->count--;
	scale_spin_unlock(&h->lock);
}

static long walk(struct pclist_head *h, void (*fn)(struct pclist_node *n, void *arg), void *arg)
{
	long n = 0;
	for (struct pclist_node *p = h->anchor.next; p != &h->anchor; p = p->next, n++)
		if (fn)
			fn(p, arg);
	return n;
}

void lock_list_init(struct lock_list *l)
{
	head_init(&l->head);
}

void lock_list_add(struct lock_list *l, struct pclist_node *n)
{
	link_node(&l->head, n, 0);
}

void lock_list_del(struct lock_list *l, struct pclist_node *n)
{
	unlink_node(&l->head, n);
}

long lock_list_scan(struct lock_list *l, void (*fn)(struct pclist_node *n, void *arg), void *arg)
{
	scale_spin_lock(&l->head.lock);
	long n = walk(&l->head, fn, arg);
	scale_spin_unlock(&l->head.lock);
	return n;
}

int pclist_init(struct pclist *l)
{
	l->nr_slots = scale_nr_slots();
	l->heads = scale_alloc_lines(l->nr_slots, sizeof(*l->heads));
	if (!l->heads)
		return ENOMEM;
	for (unsigned i = 0; i < l->nr_slots; i++)
		head_init(&l->heads[i]);
	return 0;
}

void pclist_destroy(struct pclist *l)
{
	scale_free(l->heads);
	l->heads = NULL;
}

void pclist_add(struct pclist *l, struct pclist_node *n)
{
	unsigned home = scale_slot(l->nr_slots);
	link_node(&l->heads[home], n, home);
}

void pclist_del(struct pclist *l, struct pclist_node *n)
{
	/* home is written under the list's lock by the add that this owner made, so it is stable here. */
	unlink_node(&l->heads[n->home], n);
}

long pclist_scan(struct pclist *l, void (*fn)(struct pclist_node *n, void *arg), void *arg)
{
	long n = 0;
	for (unsigned i = 0; i < l->nr_slots; i++)
		scale_spin_lock(&l->heads[i].lock);
	for (unsigned i = 0; i < l->nr_slots; i++)
		n += walk(&l->heads[i], fn, arg);
	for (unsigned i = l->nr_slots; i-- > 0;)
		scale_spin_unlock(&l->heads[i].lock);
	return n;
}
