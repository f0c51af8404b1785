/*
 * scale/cpu.h - what "per core" means in user space, and the spin primitives the structures share.
 *
 * The kernel makes a per-CPU slot safe by disabling preemption; user space cannot. A thread reads its
 * CPU number (sched_getcpu, served from rseq or the vDSO without a system call) and may be migrated
 * before it touches the slot, so two threads can meet on one slot. Every per-core slot in libscale is
 * therefore updated with atomic operations or under the slot's own lock: correct for any thread on any
 * slot, and cheap in the common case because the slot's cache line stays on the CPU that owns it.
 */
#ifndef SCALE_CPU_H
#define SCALE_CPU_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

/*
 * Per-core data is padded to two cache lines: the adjacent-line prefetcher of x86 parts pulls lines in
 * pairs, so 64-byte padding alone still lets neighbours steal each other's lines.
 */
#define SCALE_LINE 128
#define SCALE_ALIGNED _Alignas(SCALE_LINE)

static inline void scale_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* The slot of the CPU this thread runs on now; a hint, never a promise (see above). */
static inline unsigned scale_slot(unsigned nr_slots)
{
	int cpu = sched_getcpu();
	return cpu < 0 ? 0 : (unsigned)cpu % nr_slots;
}

/* Slots to allocate: every CPU the kernel may ever bring online, so a hotplugged CPU has one too. */
unsigned scale_nr_slots(void);

/* Allocates n zeroed objects of size bytes, each aligned to SCALE_LINE; free with scale_free. */
void *scale_alloc_lines(unsigned n, size_t size);
void scale_free(void *p);

/*
 * A test-and-test-and-set spinlock: the small internal lock for per-core slots, where contention is the
 * rare case. (The locks compared in the lock benchmark are in scale/lock.h.)
 */
struct scale_spinlock {
	atomic_bool held;
};

#define SCALE_SPINLOCK_INITIALIZER { false }

static inline void scale_spin_lock(struct scale_spinlock *l)
{
	for (;;) {
		/* Acquire: the critical section's reads must not move above the lock. */
		if (!atomic_exchange_explicit(&l->held, true, memory_order_acquire))
			return;
		/* Spin on a plain load so waiters share the line instead of bouncing it with writes. */
		while (atomic_load_explicit(&l->held, memory_order_relaxed))
			scale_cpu_relax();
	}
}

static inline void scale_spin_unlock(struct scale_spinlock *l)
{
	/* Release: the critical section's writes are visible before the next holder gets in. */
	atomic_store_explicit(&l->held, false, memory_order_release);
}

#endif
