/*
 * Per-core lists: threads add and remove their own nodes, migrating between the add and the remove
 * (the expensive remote remove), while scans check that every node sits on the list it says it does
 * and that the lists' counts agree with what a walk finds.
 */
#include "scale/pclist.h"
#include "stress.h"

#define NODES 8

struct owned {
	struct pclist_node node;
	unsigned slot_seen;	/* set by scans */
	atomic_bool linked;
};

static struct pclist lists;
static struct lock_list stock;
static _Atomic long scans;

static void check_node(struct pclist_node *n, void *arg)
{
	struct owned *o = (struct owned *)n;
	(void)arg;
	CHECK(atomic_load(&o->linked), "a scan found a node its owner had removed");
}

static void scanner(struct stress_worker *w)
{
	while (stress_running(w)) {
		long walked = pclist_scan(&lists, check_node, NULL);
		long counted = 0;
		/* Counts read with every lock held must equal the walk. */
		for (unsigned i = 0; i < lists.nr_slots; i++)
			scale_spin_lock(&lists.heads[i].lock);
		for (unsigned i = 0; i < lists.nr_slots; i++) {
			counted += lists.heads[i].count;
			for (struct pclist_node *p = lists.heads[i].anchor.next; p != &lists.heads[i].anchor; p = p->next)
				CHECK(p->home == i, "node on list %u says its home is %u", i, p->home);
		}
		for (unsigned i = lists.nr_slots; i-- > 0;)
			scale_spin_unlock(&lists.heads[i].lock);
		CHECK(walked >= 0 && counted >= 0, "negative count");
		lock_list_scan(&stock, check_node, NULL);
		atomic_fetch_add(&scans, 1);
	}
}

static void owner(struct stress_worker *w)
{
	struct owned mine[NODES] = { 0 }, stock_nodes[NODES] = { 0 };
	while (stress_running(w)) {
		for (int i = 0; i < NODES; i++) {
			atomic_store(&mine[i].linked, true);
			pclist_add(&lists, &mine[i].node);
			atomic_store(&stock_nodes[i].linked, true);
			lock_list_add(&stock, &stock_nodes[i].node);
		}
		if (stress_rand(w) % 8 == 0)
			stress_migrate(w);	/* the removes below then lock another CPU's list */
		for (int i = NODES; i-- > 0;) {
			pclist_del(&lists, &mine[i].node);
			atomic_store(&mine[i].linked, false);
			lock_list_del(&stock, &stock_nodes[i].node);
			atomic_store(&stock_nodes[i].linked, false);
		}
	}
}

static void body(struct stress_worker *w)
{
	if (w->id == 0)
		scanner(w);
	else
		owner(w);
}

int main(void)
{
	unsigned n = stress_threads();
	struct stress_worker *w = calloc(n, sizeof(*w));
	CHECK(w && pclist_init(&lists) == 0, "init");
	lock_list_init(&stock);
	stress_run(n, stress_seconds(), body, NULL, w);
	CHECK(pclist_scan(&lists, NULL, NULL) == 0, "nodes left after every owner removed its own");
	CHECK(lock_list_scan(&stock, NULL, NULL) == 0, "nodes left on the stock list");
	CHECK(atomic_load(&scans) > 0, "no scan ran");
	pclist_destroy(&lists);
	free(w);
	printf("PASS pclist: %ld scans consistent with concurrent adds and remote removes (%u threads on %u CPUs)\n",
	       atomic_load(&scans), n, stress_cpus());
	return 0;
}
