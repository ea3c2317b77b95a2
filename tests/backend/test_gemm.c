/* gemm_fixed (backend/cpu/gemm_fixed.h), bit for bit where its contract
 * says bits, and against a double-precision reference:
 *   - every result equals a plain loop of fmaf over k ascending from 0.0f,
 *     then the alpha/beta epilogue, bit for bit: all four transpose
 *     combinations, sizes 0 to 1600 around the tile and block edges, leading
 *     dimensions wider than the matrices (the gaps must stay untouched),
 *     alpha/beta combinations, beta = 0 with NaN in C (C must not be read);
 *     for every kernel this CPU runs (the ISA cap lowered step by step) and
 *     1, 2 and 3 threads;
 *   - a row of C does not depend on M (1, 2, 5, 17, 300), on the rows
 *     around it or on its position, on the thread count or on the kernel;
 *   - called with nthreads 1 from inside an OpenMP parallel region;
 *   - within the first-order rounding bound of a K-term sum of the exact
 *     (double) result: |got - exact| <= (K + 3) * 2^-24 *
 *     (|alpha| * sum_k |a b| + |beta * c|).
 * The scalar kernel has the AVX-512 kernel's tile shape (12 x 32) and code
 * (gemm_fixed_kernel.inc), so that shape's blocking and tails are checked
 * here on any CPU; the AVX-512 instructions themselves run only where the
 * CPU has AVX-512F, and the output says whether they ran. */
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_fixed.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 12345.0f

struct prob {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0; /* C0: the C before the call, ldc wide, gaps hold SENTINEL */
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static float opa(const struct prob *p, int i, int k)
{
    return p->ta ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k];
}

static float opb(const struct prob *p, int k, int j)
{
    return p->tb ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j];
}

/* Random operands; pad extra columns in each stored row (filled with
 * random numbers, never read). With beta == 0, C0 is NaN: it must not be
 * read. */
static void prob_make(struct prob *p, int ta, int tb, int M, int N, int K, int pad, float alpha, float beta)
{
    *p = (struct prob){ta, tb, M, N, K, 0, 0, 0, alpha, beta, NULL, NULL, NULL};
    int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    p->lda = acols + pad;
    p->ldb = bcols + pad;
    p->ldc = N + pad;
    p->A = xmalloc(sizeof(float) * (size_t)arows * p->lda);
    p->B = xmalloc(sizeof(float) * (size_t)brows * p->ldb);
    p->C0 = xmalloc(sizeof(float) * (size_t)M * p->ldc);
    tu_fill(p->A, (size_t)arows * p->lda, -1, 1);
    tu_fill(p->B, (size_t)brows * p->ldb, -1, 1);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < p->ldc; j++)
            p->C0[(size_t)i * p->ldc + j] = j >= N ? SENTINEL : beta == 0.0f ? NAN : (float)(2 * tu_urand() - 1);
}

static void prob_free(struct prob *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
}

/* The contract, written out: C (ldc wide, a copy of C0) gets the result. */
static void ref_fma(const struct prob *p, float *C)
{
    memcpy(C, p->C0, sizeof(float) * (size_t)p->M * p->ldc);
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            float s = 0.0f;
            for (int k = 0; k < p->K; k++) s = fmaf(opa(p, i, k), opb(p, k, j), s);
            float *c = C + (size_t)i * p->ldc + j;
            float o = p->alpha == 1.0f ? s : p->alpha * s;
            if (p->beta != 0.0f) {
                float old = p->beta == 1.0f ? *c : p->beta * *c;
                o = o + old;
            }
            *c = o;
        }
}

static float *run_gemm(const struct prob *p, int nthreads)
{
    float *C = xmalloc(sizeof(float) * (size_t)p->M * p->ldc);
    memcpy(C, p->C0, sizeof(float) * (size_t)p->M * p->ldc);
    gemm_fixed(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc, nthreads);
    return C;
}

/* Bitwise over the whole ldc-wide block (gaps included: they must still
 * hold SENTINEL). Prints the first difference. */
static int same_bits(const char *what, const struct prob *p, const float *got, const float *want)
{
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->ldc; j++) {
            size_t o = (size_t)i * p->ldc + j;
            if (memcmp(got + o, want + o, sizeof(float)) != 0) {
                fprintf(stderr, "FAIL %s: ta=%d tb=%d M=%d N=%d K=%d ld=%d/%d/%d alpha=%g beta=%g: C[%d][%d] = %.9g, want %.9g%s\n",
                        what, p->ta, p->tb, p->M, p->N, p->K, p->lda, p->ldb, p->ldc, p->alpha, p->beta, i, j,
                        got[o], want[o], j >= p->N ? " (outside N: must be untouched)" : "");
                return 0;
            }
        }
    return 1;
}

static enum gemm_isa isa_best;
static const int thread_counts[] = {1, 2, 3};

/* ------------------------------------------------------------------------ */

static const float alphas[] = {1.0f, 1.0f, 0.5f, -1.5f, 1.0f, 0.3f};
static const float betas[] = {0.0f, 1.0f, 0.0f, 1.0f, -0.25f, 0.7f};
enum { NAB = sizeof alphas / sizeof alphas[0] };

/* Every problem, every kernel, every thread count: bits of the fmaf loop. */
static void test_against_fma_loop(void)
{
    static const int small[] = {1, 7, 33};
    static const int big[][3] = {{383, 385, 31}, {385, 31, 383}, {31, 383, 385}, {385, 385, 385},
                                 {300, 1600, 40}, {150, 40, 600}, {13, 97, 257}, {5, 9, 0}};
    int nbig = sizeof big / sizeof big[0], nprob = 0, ncmp = 0, bad = 0, variant = 0;
    for (int t = 0; t < 4; t++) {
        int ta = t >> 1, tb = t & 1;
        for (int s = 0; s < 27 + nbig; s++, variant++) {
            int M, N, K;
            if (s < 27) {
                M = small[s / 9], N = small[s / 3 % 3], K = small[s % 3];
            } else {
                M = big[s - 27][0], N = big[s - 27][1], K = big[s - 27][2];
                if (tu_sanitized() && (size_t)M * N * K > 5000000) continue;
            }
            struct prob p;
            int ab = variant % NAB;
            prob_make(&p, ta, tb, M, N, K, variant % 3 == 0 ? 0 : 3, alphas[ab], betas[ab]);
            float *want = xmalloc(sizeof(float) * (size_t)M * p.ldc);
            ref_fma(&p, want);
            for (int isa = GEMM_ISA_SCALAR; isa <= (int)isa_best; isa++)
                for (int th = 0; th < 3; th++) {
                    gemm_fixed_set_isa((enum gemm_isa)isa);
                    float *got = run_gemm(&p, thread_counts[th]);
                    char what[80];
                    snprintf(what, sizeof what, "%s, %d threads vs fmaf loop", gemm_isa_name((enum gemm_isa)isa),
                             thread_counts[th]);
                    int ok = same_bits(what, &p, got, want);
                    CHECK(ok, "%s", what);
                    bad += !ok;
                    ncmp++;
                    free(got);
                }
            free(want);
            prob_free(&p);
            nprob++;
        }
    }
    gemm_fixed_set_isa(GEMM_ISA_AVX512);
    printf("fmaf loop: %d problems (4 transpose pairs; M, N, K in {1, 7, 33} and up to 1600; ld +0/+3; %d alpha/beta "
           "pairs), %d runs over kernels scalar..%s x threads 1,2,3: %d differ in a bit\n",
           nprob, NAB, ncmp, gemm_isa_name(isa_best), bad);
}

/* One fixed row (of op(A) and of the old C) inside batches of other rows. */
static void test_row_invariance(void)
{
    static const int Ms[] = {1, 2, 5, 17, 300};
    int K = 385, N = 45, ncmp = 0, bad = 0;
    for (int t = 0; t < 4; t++) {
        int ta = t >> 1, tb = t & 1;
        struct prob one;
        prob_make(&one, ta, tb, 1, N, K, 2, 0.75f, 1.0f);
        /* the row as M = 1: op(A) row 0 and C row 0 */
        float *arow = xmalloc(sizeof(float) * K), *crow = xmalloc(sizeof(float) * N);
        for (int k = 0; k < K; k++) arow[k] = opa(&one, 0, k);
        memcpy(crow, one.C0, sizeof(float) * N);
        gemm_fixed_set_isa(GEMM_ISA_SCALAR);
        float *base = run_gemm(&one, 1);
        for (int mi = 0; mi < 5; mi++) {
            int M = Ms[mi];
            int pos[3] = {0, M / 2, M - 1};
            for (int pi = 0; pi < 3; pi++) {
                struct prob p;
                prob_make(&p, ta, tb, M, N, K, 2, 0.75f, 1.0f);
                memcpy(p.B, one.B, sizeof(float) * (size_t)(tb ? N : K) * one.ldb); /* same op(B), same ldb */
                for (int k = 0; k < K; k++) {
                    if (ta)
                        p.A[(size_t)k * p.lda + pos[pi]] = arow[k];
                    else
                        p.A[(size_t)pos[pi] * p.lda + k] = arow[k];
                }
                memcpy(p.C0 + (size_t)pos[pi] * p.ldc, crow, sizeof(float) * N);
                for (int isa = GEMM_ISA_SCALAR; isa <= (int)isa_best; isa++)
                    for (int th = 0; th < 3; th++) {
                        gemm_fixed_set_isa((enum gemm_isa)isa);
                        float *got = run_gemm(&p, thread_counts[th]);
                        int ok = memcmp(got + (size_t)pos[pi] * p.ldc, base, sizeof(float) * N) == 0;
                        CHECK(ok, "ta=%d tb=%d: row at %d of M=%d (%s, %d threads) differs from the row alone", ta, tb,
                              pos[pi], M, gemm_isa_name((enum gemm_isa)isa), thread_counts[th]);
                        bad += !ok;
                        ncmp++;
                        free(got);
                    }
                prob_free(&p);
            }
        }
        free(base);
        free(arow);
        free(crow);
        prob_free(&one);
    }
    gemm_fixed_set_isa(GEMM_ISA_AVX512);
    printf("row invariance: one row (K=%d, N=%d, alpha 0.75, beta 1) at the top, middle and bottom of M = 1, 2, 5, "
           "17, 300 other rows, kernels scalar..%s x threads 1,2,3 (4 transpose pairs): %d runs, %d differ from the "
           "row alone (scalar, 1 thread)\n",
           K, N, gemm_isa_name(isa_best), ncmp, bad);
}

/* nthreads 1 from inside a parallel region, as the attention loop calls it. */
static void test_nested(void)
{
    enum { NP = 4 };
    struct prob p[NP];
    float *want[NP], *got[NP];
    for (int i = 0; i < NP; i++) {
        prob_make(&p[i], 0, i & 1, 50 + i, 70, 300, 0, 1.0f, i & 1 ? 1.0f : 0.0f);
        want[i] = xmalloc(sizeof(float) * (size_t)p[i].M * p[i].ldc);
        ref_fma(&p[i], want[i]);
    }
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int i = 0; i < NP; i++) got[i] = run_gemm(&p[i], 1);
    int bad = 0;
    for (int i = 0; i < NP; i++) {
        int ok = same_bits("inside a parallel region", &p[i], got[i], want[i]);
        CHECK(ok, "problem %d inside a parallel region", i);
        bad += !ok;
        free(got[i]);
        free(want[i]);
        prob_free(&p[i]);
    }
    printf("nested: %d problems with nthreads 1 on 2 threads of a parallel region (%s): %d differ from the fmaf loop\n",
           NP, gemm_isa_name(gemm_fixed_isa()), bad);
}

/* Against the exact result, within the rounding bound. */
static void test_against_double(void)
{
    static const int shapes[][3] = {{64, 80, 1}, {37, 45, 385}, {100, 33, 3072}, {3, 5, 10000}};
    const double u = 1.0 / 16777216.0;
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++) {
            int ab = (s * 4 + t) % NAB;
            struct prob p;
            prob_make(&p, t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], 1, alphas[ab], betas[ab]);
            float *got = run_gemm(&p, 2);
            double worst = 0;
            int bad = 0;
            for (int i = 0; i < p.M; i++)
                for (int j = 0; j < p.N; j++) {
                    double exact = 0, mag = 0;
                    for (int k = 0; k < p.K; k++) {
                        double prod = (double)opa(&p, i, k) * opb(&p, k, j);
                        exact += prod;
                        mag += fabs(prod);
                    }
                    double c = p.beta != 0.0f ? p.C0[(size_t)i * p.ldc + j] : 0.0;
                    double want = p.alpha * exact + p.beta * c;
                    double tol = (p.K + 3) * u * (fabs(p.alpha) * mag + fabs(p.beta * c)) + 1e-30;
                    double r = fabs(got[(size_t)i * p.ldc + j] - want) / tol;
                    if (!(r <= 1.0)) bad++;
                    if (r > worst || r != r) worst = r;
                }
            CHECK(bad == 0, "ta=%d tb=%d M=%d N=%d K=%d: %d elements beyond (K+3) u (|alpha| sum|ab| + |beta c|)",
                  p.ta, p.tb, p.M, p.N, p.K, bad);
            printf("double reference: ta=%d tb=%d M=%-3d N=%-3d K=%-5d alpha=%-4g beta=%-5g largest error / bound = "
                   "%.3f\n",
                   p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.beta, worst);
            free(got);
            prob_free(&p);
        }
}

static void test_isa_cap(void)
{
    gemm_fixed_set_isa(GEMM_ISA_SCALAR);
    CHECK(gemm_fixed_isa() == GEMM_ISA_SCALAR, "cap scalar gives %s", gemm_isa_name(gemm_fixed_isa()));
    gemm_fixed_set_isa(GEMM_ISA_AVX2);
    CHECK(gemm_fixed_isa() <= GEMM_ISA_AVX2, "cap avx2 gives %s", gemm_isa_name(gemm_fixed_isa()));
    gemm_fixed_set_isa(GEMM_ISA_AVX512);
    CHECK(gemm_fixed_isa() == isa_best, "cap removed gives %s", gemm_isa_name(gemm_fixed_isa()));
    /* without a cap of its own, the kernel is the one the level decided (BERTC_CPU_ISA included) */
    cpu_isa_level l = cpu_kernel_level(CPU_K_GEMM_FIXED);
    enum gemm_isa want = l >= CPU_ISA_AVX512 ? GEMM_ISA_AVX512 : l >= CPU_ISA_AVX2 ? GEMM_ISA_AVX2 : GEMM_ISA_SCALAR;
#if !defined(__x86_64__)
    want = GEMM_ISA_SCALAR;
#endif
    CHECK(isa_best == want, "level %s gives kernel %s, want %s", cpu_isa_name(l), gemm_isa_name(isa_best),
          gemm_isa_name(want));
}

int main(void)
{
    gemm_fixed_set_isa(GEMM_ISA_AVX512);
    isa_best = gemm_fixed_isa();
    printf("kernels at level %s (%s): scalar..%s; the AVX-512 kernel %s\n", cpu_isa_name(cpu_isa()->level),
           cpu_isa()->level_from, gemm_isa_name(isa_best),
           isa_best == GEMM_ISA_AVX512 ? "runs here"
                                       : "does NOT run here (not at this level): only its tile shape, as the scalar kernel");
    test_isa_cap();
    test_against_fma_loop();
    test_row_invariance();
    test_nested();
    test_against_double();
    return tu_done();
}
