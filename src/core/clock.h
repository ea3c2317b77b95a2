/* Clocks as seconds in a double: for timing, deadlines and timestamps. */
#ifndef BERTC_CLOCK_H
#define BERTC_CLOCK_H

#include <pthread.h>

/* CLOCK_MONOTONIC: durations and deadlines, unaffected by changes to the
 * wall clock; only differences between two readings mean anything.
 * Deadlines waited for with pthread_cond_timedwait need a condition
 * variable on CLOCK_MONOTONIC too (clock_cond_init). */
double clock_now_s(void);
/* CPU time of the whole process (all threads); NaN when unavailable. Set
 * beside the monotonic time it shows how much of that time the process ran
 * (less than all of it on a shared machine). */
double clock_cpu_s(void);
/* Wall-clock time since the Unix epoch (CLOCK_REALTIME): timestamps. */
double clock_unix_s(void);
/* A condition variable on CLOCK_MONOTONIC, for pthread_cond_timedwait
 * deadlines taken from clock_now_s. */
void clock_cond_init(pthread_cond_t *cv);

#endif
