/* Clocks as seconds (see clock.h). */
#include "core/clock.h"

#include <math.h>
#include <time.h>

static double read_clock(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return NAN;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double clock_now_s(void) { return read_clock(CLOCK_MONOTONIC); }
double clock_cpu_s(void) { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
double clock_unix_s(void) { return read_clock(CLOCK_REALTIME); }

void clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}
