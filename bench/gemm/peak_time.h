/* The timing loop that bench/gemm/fma_peak.c and int8_peak.c share: fn runs
 * on every one of `threads` OpenMP threads at once, 5 rounds; returns the
 * best rate, ops (all threads together, one round) per second, in G/s. The
 * threads' results are summed into a volatile so that nothing is optimised
 * away. */
#ifndef BERTC_BENCH_PEAK_TIME_H
#define BERTC_BENCH_PEAK_TIME_H

#include <omp.h>

static double peak_best(int threads, double ops, float (*fn)(void))
{
    double best = 0;
    volatile float sink = 0;
    for (int round = 0; round < 5; round++) {
        double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
        {
            float s = fn();
#pragma omp atomic
            sink += s;
        }
        double g = ops / (omp_get_wtime() - t0) * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

#endif
