#include "scale/freelist.h"

#include <errno.h>

static void list_init(struct fl_list *l)
{
	l->lock = (struct scale_spinlock)SCALE_SPINLOCK_INITIALIZER;
	l->head = NULL;
	l->count = 0;
}

/* Both with l->lock held. */
static struct fl_obj *pop(struct fl_list *l)
{
	struct fl_obj *o = l->head;
	if (o) {
		l->head = o->next;
		l->count--;
	}
	return o;
}

static void push(struct fl_list *l, struct fl_obj *o)
{
	o->next = l->head;
	l->head = o;
	l->count++;
}

void global_freelist_init(struct global_freelist *f)
{
	list_init(&f->list);
}

struct fl_obj *global_freelist_alloc(struct global_freelist *f)
{
	scale_spin_lock(&f->list.lock);
	struct fl_obj *o = pop(&f->list);
	scale_spin_unlock(&f->list.lock);
	return o;
}

void global_freelist_free(struct global_freelist *f, struct fl_obj *o)
{
	scale_spin_lock(&f->list.lock);
	push(&f->list, o);
	scale_spin_unlock(&f->list.lock);
}

int pc_freelist_init(struct pc_freelist *f, long batch)
{
	f->batch = batch < 1 ? 1 : batch;
	f->nr_slots = scale_nr_slots();
	list_init(&f->global);
	f->slots = scale_alloc_lines(f->nr_slots, sizeof(*f->slots));
	if (!f->slots)
		return ENOMEM;
	for (unsigned i = 0; i < f->nr_slots; i++)
		list_init(&f->slots[i]);
	return 0;
}

void pc_freelist_destroy(struct pc_freelist *f)
{
	scale_free(f->slots);
	f->slots = NULL;
}

/* Moves up to n objects from one list to another; the caller holds both locks. */
static void move(struct fl_list *from, struct fl_list *to, long n)
{
	struct fl_obj *o;
	while (n-- > 0 && (o = pop(from)))
		push(to, o);
}

struct fl_obj *pc_freelist_alloc(struct pc_freelist *f)
{
	struct fl_list *local = &f->slots[scale_slot(f->nr_slots)];

	scale_spin_lock(&local->lock);
	struct fl_obj *o = pop(local);
	if (!o) {
		/* Lock order everywhere: a slot's lock, then the global one. */
		scale_spin_lock(&f->global.lock);
		move(&f->global, local, f->batch);
		scale_spin_unlock(&f->global.lock);
		o = pop(local);
	}
	scale_spin_unlock(&local->lock);
	return o;
}

void pc_freelist_free(struct pc_freelist *f, struct fl_obj *o)
{
	struct fl_list *local = &f->slots[scale_slot(f->nr_slots)];

	scale_spin_lock(&local->lock);
	push(local, o);
	if (local->count > 2 * f->batch) {
		scale_spin_lock(&f->global.lock);
		move(local, &f->global, f->batch);
		scale_spin_unlock(&f->global.lock);
	}
	scale_spin_unlock(&local->lock);
}

long pc_freelist_count(struct pc_freelist *f)
{
	long n = 0;
	for (unsigned i = 0; i < f->nr_slots; i++) {
		scale_spin_lock(&f->slots[i].lock);
		n += f->slots[i].count;
		scale_spin_unlock(&f->slots[i].lock);
	}
	scale_spin_lock(&f->global.lock);
	n += f->global.count;
	scale_spin_unlock(&f->global.lock);
	return n;
}
