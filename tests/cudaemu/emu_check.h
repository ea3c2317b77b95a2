/* The two cudaemu test programs' report: one line per comparison, PASS or
 * FAIL, and the counts that decide the exit status. */
#ifndef CUDAEMU_EMU_CHECK_H
#define CUDAEMU_EMU_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static int failures, passes;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) failures++;
    else passes++;
}

/* The largest |a[i] - b[i]| over the largest |b[i]| (infinite where a
 * difference is NaN): the error of a against the reference b. */
static inline double emu_rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        e = d != d ? INFINITY : (d > e ? d : e);
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / m;
}

/* The last line and the exit status. */
static int check_summary(void)
{
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}

#endif
