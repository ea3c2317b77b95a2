/* What the test programs share: counted checks, a closing "N passed, N
 * failed" line, float comparisons that print what they compared, data and
 * temp paths, and checks of refused input. Built once as a library
 * (bertc_testutil) that every test program links. */
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
/* 1 under ASan/UBSan: heavy tests may shrink their work. */
int tu_sanitized(void);

/* Deterministic test data: xorshift64 on tu_rng_state (set it to seed a
 * sequence; it must not be 0). tu_urand is uniform in [0, 1) with 53 bits;
 * tu_fill fills x[0..n) uniformly in [lo, hi). */
extern uint64_t tu_rng_state;
double tu_urand(void);
void tu_fill(float *x, size_t n, double lo, double hi);

/* Seconds on the monotonic clock. */
double tu_now_s(void);

/* ---- files ----------------------------------------------------------------
 * tu_data and tu_tmp_path return static buffers, each reused 32 calls later. */

/* Path of a file in ../shared/data (BERTC_DATA). */
const char *tu_data(const char *rel);
/* A fresh empty temp dir for this test (removed by nobody: under /tmp). */
const char *tu_tmpdir(void);
/* Path of name (which may hold a subdir) in tu_tmpdir(). */
const char *tu_tmp_path(const char *name);
/* Writes n bytes to path; a file that cannot be written counts a failure. */
void tu_write_file(const char *path, const void *data, size_t n);
/* Writes text to name in tu_tmpdir(); returns its path. */
const char *tu_write_tmp(const char *name, const char *text);
/* The same for n bytes that may hold NULs. */
const char *tu_write_tmp_bytes(const char *name, const void *data, size_t n);
/* A file's contents, NUL-terminated and malloc'ed; NULL (the error cleared)
 * when it cannot be read. */
char *tu_read_text(const char *path);
/* The number of newlines in s (0 for NULL). */
int tu_count_lines(const char *s);

/* ---- refused input --------------------------------------------------------
 * Checks that rc is ERR_INPUT and that err_msg() names `where` (when not
 * NULL: the file) and holds every string of the NULL-terminated list that
 * follows; one counted check each. Prints what, rc and the message. */
void tu_expect_input_error(const char *what, int rc, const char *where, ...) __attribute__((sentinel));

#endif
