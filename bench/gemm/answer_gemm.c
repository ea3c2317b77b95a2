/* The linear layers of answers on the CPU, timed: bertc's int8 and bf16
 * kernels of inference (backend/cpu/gemm_lowp.h) against the fp32 products bertc
 * has (gemm_fixed, the batch-invariant one that predict and serve use;
 * OpenBLAS's cblas_sgemm; oneDNN's dnnl_sgemm where bertc loads it), at the
 * layer shapes of minilm and base, out[N][OC] = in[N][C] @ W[OC][C]^T (+ b).
 * bench/gemm/answer_gemm.sh builds it (the answer_gemm target) and runs it
 * beside bench/gemm/int8_peak.c and fma_peak.c.
 *
 *   answer_gemm N THREADS REPS [C:OC ...]
 *
 * Prints one line per shape and product: "C OC product threads seconds
 * G-ops/s" (2 N C OC ops; the best of REPS calls after one warm-up call; the
 * products take turns call by call, so that load from elsewhere falls on
 * all of them alike). The int8 and bf16 times include quantising or rounding
 * the activations (every call does); preparing the weights is done once,
 * before. */
#include "backend/cpu/gemm_fixed.h"
#include "backend/cpu/gemm_lowp.h"
#include "backend/cpu_kernels.h"
#include "core/err.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_INT8, P_BF16, P_FIXED, P_OPENBLAS, P_ONEDNN, P_COUNT };
static const char *const pname[P_COUNT] = {"int8", "bf16", "fp32_gemm_fixed", "fp32_openblas", "fp32_onednn"};

struct shape {
    int N, C, OC, th;
    float *in, *W, *b, *out;
    gemm_lowp_layer *w8, *w16;
    onednn_sgemm_fn dnnl;
};

/* One call of product p. */
static double call(const struct shape *s, int p)
{
    double t0 = omp_get_wtime();
    switch (p) {
    case P_INT8: gemm_lowp(s->w8, s->N, s->in, s->C, s->out, s->OC, s->th); break;
    case P_BF16: gemm_lowp(s->w16, s->N, s->in, s->C, s->out, s->OC, s->th); break;
    case P_FIXED: gemm_fixed(0, 1, s->N, s->OC, s->C, 1.0f, s->in, s->C, s->W, s->C, 0.0f, s->out, s->OC, s->th); break;
    case P_OPENBLAS:
        openblas_set_num_threads(s->th);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->N, s->OC, s->C, 1.0f, s->in, s->C, s->W, s->C, 0.0f,
                    s->out, s->OC);
        break;
    case P_ONEDNN:
        omp_set_num_threads(s->th);
        s->dnnl('N', 'T', s->N, s->OC, s->C, 1.0f, s->in, s->C, s->W, s->C, 0.0f, s->out, s->OC);
        break;
    default: break;
    }
    return omp_get_wtime() - t0;
}

static void run_shape(struct shape *s, int reps)
{
    double best[P_COUNT];
    int np = s->dnnl ? P_COUNT : P_ONEDNN;
    for (int p = 0; p < np; p++) {
        (void)call(s, p); /* warm-up: page faults, working memory, oneDNN's JIT */
        best[p] = 1e30;
    }
    for (int r = 0; r < reps; r++)
        for (int p = 0; p < np; p++) {
            double t = call(s, p);
            if (t < best[p]) best[p] = t;
        }
    for (int p = 0; p < np; p++)
        printf("%d %d %s %d %.6f %.1f\n", s->C, s->OC, pname[p], s->th, best[p],
               2.0 * s->N * s->C * s->OC / best[p] * 1e-9);
    fflush(stdout);
}

static float *fill(size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    if (!x) exit(2);
    uint64_t st = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        x[i] = scale * ((float)(st >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
    return x;
}

int main(int argc, char **argv)
{
    if (cpu_kernels_init(argc, argv) != 0) {
        fprintf(stderr, "answer_gemm: %s\n", err_msg());
        return 2;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: answer_gemm N THREADS REPS [C:OC ...]\n");
        return 2;
    }
    int N = atoi(argv[1]), th = atoi(argv[2]), reps = atoi(argv[3]);
    static const char *const dflt[] = {"384:384", "384:1536", "1536:384", "768:768", "768:3072", "3072:768"};
    int nsh = argc > 4 ? argc - 4 : 6;
    (void)cpu_kernels_gemm_choose();
    printf("# int8 kernel %s, bf16 kernel %s, gemm_fixed %s, oneDNN sgemm %s\n", gemm_lowp_kernel(GEMM_LOWP_INT8), gemm_lowp_kernel(GEMM_LOWP_BF16),
           gemm_isa_name(gemm_fixed_isa()), cpu_kernels_onednn_sgemm() ? "loaded" : "not loaded");
    for (int i = 0; i < nsh; i++) {
        struct shape s = {N, 0, 0, th, NULL, NULL, NULL, NULL, NULL, NULL, cpu_kernels_onednn_sgemm()};
        if (sscanf(argc > 4 ? argv[4 + i] : dflt[i], "%d:%d", &s.C, &s.OC) != 2) return 2;
        s.in = fill((size_t)N * s.C, 2.0f);
        s.W = fill((size_t)s.OC * s.C, 0.05f);
        s.b = fill((size_t)s.OC, 0.02f);
        s.out = fill((size_t)N * s.OC, 0.0f);
        s.w8 = gemm_lowp_prepare(GEMM_LOWP_INT8, s.W, s.C, s.b, s.OC, s.C);
        s.w16 = gemm_lowp_prepare(GEMM_LOWP_BF16, s.W, s.C, s.b, s.OC, s.C);
        if (!s.w8 || !s.w16) return 2;
        run_shape(&s, reps);
        gemm_lowp_free(s.w8);
        gemm_lowp_free(s.w16);
        free(s.in);
        free(s.W);
        free(s.b);
        free(s.out);
    }
    return 0;
}
