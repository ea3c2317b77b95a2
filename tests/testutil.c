#include "testutil.h"

#include "backend/cpu_kernels.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tu_pass, tu_fail;

/* Test programs choose their CPU kernels as bertc does (BERTC_CPU_ISA, the
 * OpenBLAS core), before main and any BLAS call; glibc passes main's
 * arguments to constructors. */
__attribute__((constructor)) static void tu_cpu_kernels(int argc, char **argv, char **envp)
{
    (void)envp;
    if (cpu_kernels_init(argc, argv) != 0) {
        fprintf(stderr, "%s\n", err_msg());
        exit(2);
    }
    if (getenv("BERTC_TEST_PRINT_KERNELS")) {
        char line[512];
        printf("kernels: %s\n", cpu_kernels_describe(line, sizeof line));
    }
}

uint64_t tu_rng_state = 0x9E3779B97F4A7C15ull;

double tu_urand(void)
{
    tu_rng_state ^= tu_rng_state << 13;
    tu_rng_state ^= tu_rng_state >> 7;
    tu_rng_state ^= tu_rng_state << 17;
    return (double)(tu_rng_state >> 11) * (1.0 / 9007199254740992.0);
}

void tu_fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * tu_urand());
}

int tu_close(const char *name, const float *got, const float *want, size_t n, double rtol, double atol)
{
    double max_abs = 0, max_rel = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double r = d / (fabs((double)want[i]) + 1e-30);
        if (!(d <= atol + rtol * fabs((double)want[i]))) bad++;
        if (d > max_abs || d != d) { max_abs = d; worst = i; }
        if (r > max_rel && fabs(want[i]) > atol) max_rel = r;
    }
    printf("%-60s n=%-8zu max_abs=%.3e max_rel=%.3e %s\n", name, n, max_abs, max_rel, bad ? "MISMATCH" : "ok");
    if (bad) {
        tu_fail++;
        fprintf(stderr, "FAIL %s: %zu of %zu beyond rtol %.1e atol %.1e; worst [%zu] got %.9g want %.9g\n", name, bad,
                n, rtol, atol, worst, got[worst], want[worst]);
        return 0;
    }
    tu_pass++;
    return 1;
}

int tu_done(void)
{
    printf("%d passed, %d failed\n", tu_pass, tu_fail);
    return tu_fail ? 1 : 0;
}

const char *tu_data(const char *rel)
{
    static char bufs[8][4096];
    static int slot;
    const char *root = getenv("BERTC_DATA");
    char *b = bufs[slot++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", root ? root : "../shared/data", rel);
    return b;
}

const char *tu_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/bertc-test-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(1);
        }
    }
    return dir;
}

int tu_sanitized(void)
{
    const char *s = getenv("BERTC_SANITIZED");
    return s && *s == '1';
}
