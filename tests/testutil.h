/* What every test program uses: counted checks, a closing "N passed, N failed"
 * line, float comparisons that print what they compared, and data paths. */
#ifndef BERTC_TESTUTIL_H
#define BERTC_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int tu_pass, tu_fail;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            tu_pass++;                                                                \
        } else {                                                                      \
            tu_fail++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* Compares n floats; prints name, max abs and max rel difference; counts a
 * failure when any |a-b| > atol + rtol*|b|. Returns 1 when they match. */
int tu_close(const char *name, const float *got, const float *want, size_t n, double rtol, double atol);
/* Prints "N passed, N failed" and returns the exit code. */
int tu_done(void);
/* Path of a file in ../shared/data (BERTC_DATA), in a static buffer per call slot. */
const char *tu_data(const char *rel);
/* A fresh empty temp dir for this test (removed by nobody: under /tmp). */
const char *tu_tmpdir(void);
/* Deterministic test data: xorshift64 on tu_rng_state (set it to seed a
 * sequence; it must not be 0). tu_urand is uniform in [0, 1) with 53 bits;
 * tu_fill fills x[0..n) uniformly in [lo, hi). */
extern uint64_t tu_rng_state;
double tu_urand(void);
void tu_fill(float *x, size_t n, double lo, double hi);
/* 1 under ASan/UBSan: heavy tests may shrink their work. */
int tu_sanitized(void);

#endif
