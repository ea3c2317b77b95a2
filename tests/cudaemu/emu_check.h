/* The two cudaemu test programs' report: one line per comparison, PASS or
 * FAIL, and the counts that decide the exit status. */
#ifndef CUDAEMU_EMU_CHECK_H
#define CUDAEMU_EMU_CHECK_H

#include <stdarg.h>
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

/* The last line and the exit status. */
static int check_summary(void)
{
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}

#endif
