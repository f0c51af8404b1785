/*
 * What libscale's RCU structures tell ThreadSanitizer, and nothing when it is not there. liburcu's
 * grace periods and call_rcu queue are invisible to TSan (uninstrumented volatiles, membarrier), so
 * each structure annotates the ordering RCU gives it; bonsai.c and skiplist.c say which, and why.
 */
#ifndef SCALE_TSAN_H
#define SCALE_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define SCALE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SCALE_TSAN 1
#endif
#endif

#ifdef SCALE_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define tsan_acquire(addr) __tsan_acquire(addr)
#define tsan_release(addr) __tsan_release(addr)
#define tsan_ignore_begin() __tsan_ignore_thread_begin()
#define tsan_ignore_end() __tsan_ignore_thread_end()
#else
#define tsan_acquire(addr) ((void)(addr))
#define tsan_release(addr) ((void)(addr))
#define tsan_ignore_begin() ((void)0)
#define tsan_ignore_end() ((void)0)
#endif

#endif
