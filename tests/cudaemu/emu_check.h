/* What the cudaemu test programs share: the report (one line per
 * comparison, PASS or FAIL, and the counts that decide the exit status),
 * their inputs (a seeded generator, device buffers from host vectors) and
 * the child process a planted fault runs in. */
#ifndef CUDAEMU_EMU_CHECK_H
#define CUDAEMU_EMU_CHECK_H

#include "cuda_runtime_api.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

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

/* A linear congruential generator over *state: uniform in [-1, 1). */
static inline float emu_frand(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1 << 23) - 1.0f;
}

/* h in new device memory (the run stops when there is none). */
template <typename T> static inline T *emu_upload(const std::vector<T> &h)
{
    void *d = NULL;
    if (cudaMalloc(&d, h.size() * sizeof(T)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc of %zu bytes failed\n", h.size() * sizeof(T));
        exit(2);
    }
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return (T *)d;
}

template <typename T> static inline std::vector<T> emu_download(const T *d, size_t n)
{
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

/* Runs fn in a child process (a planted fault: the stand-in stops it with
 * a report and exit status 70); its exit status (128 + the signal when one
 * killed it) and what it wrote to stderr. Call it before the parent runs
 * an OpenMP region (a fork copies no OpenMP threads). */
static inline int emu_child(void (*fn)(void), std::string *err)
{
    int pfd[2];
    if (pipe(pfd)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn();
        exit(0);
    }
    close(pfd[1]);
    char buf[4096];
    ssize_t k;
    while ((k = read(pfd[0], buf, sizeof buf)) > 0) err->append(buf, (size_t)k);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
