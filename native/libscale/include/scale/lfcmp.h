/*
 * scale/lfcmp.h - dentry-style lookup by comparison: the stock form compares an entry's fields under its
 * spinlock; the scalable form is the paper's lock-free comparison (OSDI 2010, section 4.4).
 *
 * The lock-free protocol: a writer holding the entry's lock sets its generation to 0 while it changes
 * the fields, then to a new non-zero value. A reader
 *   1. reads the generation; 0 means a writer is active: fall back to the lock;
 *   2. copies the fields, then re-reads the generation; changed: fall back to the lock;
 *   3. compares the copy with the arguments; on a match takes a reference, then checks the generation
 *      once more (a writer may have renamed or killed the entry between step 2 and the reference, the
 *      case Linux's speculative page-cache lookup re-checks too); changed: drops the reference and
 *      falls back to the lock.
 * The paper's "increment the reference count unless it is 0" is the last check here: killing an entry
 * sets its generation to 0 for good, so a reader that raced with the kill gives its reference back.
 *
 * References: the stock entry counts them in a plain field under the lock (as d_count under d_lock);
 * the scalable one in a sloppy counter, as the paper's patched kernel did for dentries. Use an entry
 * through one form only.
 *
 * Concurrency: any number of lookups, puts, renames and one kill may run at once.
 */
#ifndef SCALE_LFCMP_H
#define SCALE_LFCMP_H

#include "scale/counter.h"
#include "scale/cpu.h"

#include <stdbool.h>
#include <stdint.h>

#define LDENTRY_NAME_MAX 32
#define LDENTRY_WORDS (LDENTRY_NAME_MAX / 8)

struct ldentry_name {
	uint64_t parent;
	uint32_t len;
	uint64_t words[LDENTRY_WORDS];	/* the name, zero padded */
};

struct ldentry {
	SCALE_ALIGNED struct scale_spinlock lock;
	_Atomic uint64_t gen;		/* 0 while a writer holds the lock, or for good once killed */
	uint64_t next_gen;		/* under lock */
	bool dead;			/* under lock */
	long count;			/* stock references, under lock */
	/* Read without the lock by the lock-free form, so atomic, each word on its own. */
	_Atomic uint64_t parent;
	_Atomic uint32_t len;
	_Atomic uint64_t words[LDENTRY_WORDS];
	struct sloppy_counter refs;	/* scalable references */
};

/* Makes a name from a string of at most LDENTRY_NAME_MAX bytes; returns false if it is longer. */
bool ldentry_name_set(struct ldentry_name *n, uint64_t parent, const char *name);

/* Returns 0 or ENOMEM. The entry starts with no references. */
int ldentry_init(struct ldentry *d, const struct ldentry_name *n, long sloppy_threshold);
void ldentry_destroy(struct ldentry *d);

/* Stock: compare under the lock; on a match take a reference and return true. */
bool ldentry_get_locked(struct ldentry *d, const struct ldentry_name *n);
void ldentry_put_locked(struct ldentry *d);

/* Scalable: the lock-free comparison, falling back to the lock. */
bool ldentry_get_lockfree(struct ldentry *d, const struct ldentry_name *n);
void ldentry_put_lockfree(struct ldentry *d);

/* Writer: renames the entry (d_move). */
void ldentry_rename(struct ldentry *d, const struct ldentry_name *n);
/*
 * Writer: no lookup that starts after this returns succeeds. Returns the references held now, O(CPUs):
 * exact once no reader races with the kill (a racing reader's reference is transient: it gives it back).
 */
long ldentry_kill(struct ldentry *d);

#endif
