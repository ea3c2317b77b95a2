/* The shared checks of the inference linear layers (see linear_check.h). */
#include "linear_check.h"

#include "testutil.h"

#include "backend/cpu/cpu_isa.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 12345.0f

double lc_gauss(void)
{
    double u = tu_urand(), v = tu_urand();
    return sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

void *lc_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Count of elements whose bits differ (and the first one, printed). */
static size_t diff_bits(const float *got, const float *want, int N, int OC, long ldg, long ldw, const char *what)
{
    size_t bad = 0;
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            float g = got[(size_t)i * ldg + o], w = want[(size_t)i * ldw + o];
            if (memcmp(&g, &w, sizeof g) != 0 && bad++ == 0)
                fprintf(stderr, "  %s: [%d][%d] got %.9g want %.9g\n", what, i, o, g, w);
        }
    return bad;
}

/* One shape: ref once, then run() on each kernel and thread count. */
static void bits_shape(gemm_lowp_kind L, int N, int C, int OC)
{
    long ldin = C + 3, ldout = OC + 5;
    float *in = lc_alloc(sizeof(float) * (size_t)N * ldin), *W = lc_alloc(sizeof(float) * (size_t)OC * C);
    float *b = lc_alloc(sizeof(float) * (size_t)OC), *want = lc_alloc(sizeof(float) * (size_t)N * OC);
    float *got = lc_alloc(sizeof(float) * (size_t)N * ldout);
    tu_fill(in, (size_t)N * ldin, -1, 1);
    for (int i = 0; i < N; i += 3) in[(size_t)i * ldin + (i * 7) % C] *= 9.0f; /* a few outliers */
    tu_fill(W, (size_t)OC * C, -0.1, 0.1);
    tu_fill(b, (size_t)OC, -0.5, 0.5);
    gemm_lowp_layer *w = gemm_lowp_prepare(L, W, C, b, OC, C);
    CHECK(w != NULL, "%s prepare %d x %d", gemm_lowp_name(L), OC, C);
    if (!w) return;
    gemm_lowp_ref(w, N, in, ldin, want, OC);
    int big = (double)N * C * OC > 2e7;
    for (int scalar = 0; scalar < 2; scalar++) {
        gemm_lowp_force_scalar(L, scalar);
        for (int th = big ? 2 : 1; th <= (big ? 2 : 3); th++) {
            for (size_t j = 0; j < (size_t)N * ldout; j++) got[j] = SENTINEL;
            gemm_lowp(w, N, in, ldin, got, ldout, th);
            char what[128];
            snprintf(what, sizeof what, "%s N %d C %d OC %d, %s, %d threads", gemm_lowp_name(L), N, C, OC, gemm_lowp_kernel(L), th);
            size_t bad = diff_bits(got, want, N, OC, ldout, OC, what), gap = 0;
            for (int i = 0; i < N; i++)
                for (long o = OC; o < ldout; o++) gap += got[(size_t)i * ldout + o] != SENTINEL;
            CHECK(bad == 0 && gap == 0, "%s: %zu elements differ from the reference, %zu gap elements written", what,
                  bad, gap);
        }
    }
    gemm_lowp_force_scalar(L, 0);
    printf("%s N %-3d C %-5d OC %-5d: %s and scalar kernels, %s threads: same bits as the reference\n", gemm_lowp_name(L), N, C,
           OC, gemm_lowp_kernel(L), big ? "2" : "1, 2, 3");
    gemm_lowp_free(w);
    free(in);
    free(W);
    free(b);
    free(want);
    free(got);
}

void lc_check_bits(gemm_lowp_kind L)
{
    static const int shapes[][3] = {
        {1, 32, 1},     {1, 384, 384},  {2, 33, 17},   {3, 34, 31},     {5, 100, 33},    {11, 37, 64},
        {12, 64, 32},   {13, 65, 65},   {24, 384, 96}, {25, 129, 1},    {31, 771, 100},  {36, 1536, 40},
        {47, 200, 1536}, {64, 384, 384}, {65, 1536, 1536}, {65, 1535, 97}, {17, 3, 5},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) bits_shape(L, shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* Rows r of the batch computed alone and inside 7 rows (r at position 5),
 * against the batch's; returns the number of rows that differ. */
static int rows_apart(gemm_lowp_kind L, const gemm_lowp_layer *w, const float *in, const float *batch, int N, int C, int OC,
                      int nthreads)
{
    static const int rows[] = {0, 1, 11, 12, 13, 200, 383};
    float *x7 = lc_alloc(sizeof(float) * 7 * (size_t)C), *y7 = lc_alloc(sizeof(float) * 7 * (size_t)OC);
    int bad = 0;
    for (size_t t = 0; t < sizeof rows / sizeof rows[0]; t++) {
        int r = rows[t];
        if (r >= N) continue;
        gemm_lowp(w, 1, in + (size_t)r * C, C, y7, OC, nthreads);
        bad += memcmp(y7, batch + (size_t)r * OC, sizeof(float) * OC) != 0;
        for (int j = 0; j < 7; j++) memcpy(x7 + (size_t)j * C, in + (size_t)((r + N - 5 + j) % N) * C, sizeof(float) * C);
        gemm_lowp(w, 7, x7, C, y7, OC, nthreads);
        bad += memcmp(y7 + 5 * (size_t)OC, batch + (size_t)r * OC, sizeof(float) * OC) != 0;
    }
    free(x7);
    free(y7);
    return bad;
}

void lc_check_invariance(gemm_lowp_kind L)
{
    int N = 384, C = 384, OC = 160;
    float *in = lc_alloc(sizeof(float) * (size_t)N * C), *W = lc_alloc(sizeof(float) * (size_t)OC * C);
    float *y1 = lc_alloc(sizeof(float) * (size_t)N * OC), *y2 = lc_alloc(sizeof(float) * (size_t)N * OC);
    for (size_t j = 0; j < (size_t)N * C; j++) in[j] = (float)lc_gauss();
    for (size_t j = 0; j < (size_t)OC * C; j++) W[j] = (float)(0.03 * lc_gauss());
    gemm_lowp_layer *w = gemm_lowp_prepare(L, W, C, NULL, OC, C);
    CHECK(w != NULL, "%s prepare", gemm_lowp_name(L));
    if (!w) return;
    gemm_lowp(w, N, in, C, y1, OC, 1);
    gemm_lowp(w, N, in, C, y2, OC, 2);
    CHECK(memcmp(y1, y2, sizeof(float) * (size_t)N * OC) == 0, "%s: N 384 at 1 and 2 threads differ", gemm_lowp_name(L));
    int bad1 = rows_apart(L, w, in, y1, N, C, OC, 1), bad2 = rows_apart(L, w, in, y1, N, C, OC, 2);
    CHECK(bad1 == 0 && bad2 == 0, "%s: %d rows (1 thread), %d (2 threads) differ from the batch's", gemm_lowp_name(L), bad1, bad2);
    gemm_lowp_force_scalar(L, 1);
    int bads = rows_apart(L, w, in, y1, N, C, OC, 2);
    CHECK(bads == 0, "%s: the scalar kernel's rows differ from the batch's in %d cases", gemm_lowp_name(L), bads);
    gemm_lowp_force_scalar(L, 0);
    int badp = 0;
#pragma omp parallel num_threads(2) reduction(+ : badp)
    badp += rows_apart(L, w, in, y1, N, C, OC, 1);
    CHECK(badp == 0, "%s: rows computed inside an OpenMP region differ in %d cases", gemm_lowp_name(L), badp);
    printf("%s batch invariance (%s): rows of N 384 alone, inside 7 rows, at 1 and 2 threads, on the scalar kernel, "
           "inside an OpenMP region: %s\n",
           gemm_lowp_name(L), gemm_lowp_kernel(L), bad1 + bad2 + bads + badp ? "DIFFER" : "same bits");
    gemm_lowp_free(w);
    free(in);
    free(W);
    free(y1);
    free(y2);
}

void lc_check_n(gemm_lowp_kind L)
{
    enum { NW = 3 };
    int shapes[][3] = {{1, 384, 384}, {37, 384, 384}, {200, 96, 70}, {13, 1536, 32}};
    int bad = 0, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si][0], C = shapes[si][1], OC = shapes[si][2];
        float *in = lc_alloc(sizeof(float) * (size_t)N * C), *W = lc_alloc(sizeof(float) * (size_t)OC * C);
        float *b = lc_alloc(sizeof(float) * (size_t)OC);
        float *y1[NW], *yn[NW];
        gemm_lowp_layer *w[NW];
        for (size_t j = 0; j < (size_t)N * C; j++) in[j] = (float)lc_gauss();
        for (int i = 0; i < NW; i++) {
            for (size_t j = 0; j < (size_t)OC * C; j++) W[j] = (float)(0.03 * lc_gauss());
            for (int o = 0; o < OC; o++) b[o] = (float)(0.02 * lc_gauss());
            w[i] = gemm_lowp_prepare(L, W, C, i == 1 ? NULL : b, OC, C);
            y1[i] = lc_alloc(sizeof(float) * (size_t)N * OC);
            yn[i] = lc_alloc(sizeof(float) * (size_t)N * OC);
        }
        for (int threads = 1; threads <= 2; threads++) {
            for (int i = 0; i < NW; i++) gemm_lowp(w[i], N, in, C, y1[i], OC, threads);
            gemm_lowp_n((const gemm_lowp_layer *const *)w, NW, N, in, C, yn, OC, threads);
            for (int i = 0; i < NW; i++) bad += memcmp(y1[i], yn[i], sizeof(float) * (size_t)N * OC) != 0;
            cases += NW;
        }
        for (int i = 0; i < NW; i++) {
            gemm_lowp_free(w[i]);
            free(y1[i]);
            free(yn[i]);
        }
        free(in);
        free(W);
        free(b);
    }
    CHECK(bad == 0, "%s: gemm_lowp_n differs from gemm_lowp in %d of %d outputs", gemm_lowp_name(L), bad, cases);
    printf("%s gemm_lowp_n (3 layers on one input, 4 shapes, 1 and 2 threads): %d of %d outputs the bits of "
           "gemm_lowp\n",
           gemm_lowp_name(L), cases - bad, cases);
}

/* One data set: the relative error of the layer against the exact product. */
static double bert_case(gemm_lowp_kind L, const char *what, const float *in, int N, int C, int OC)
{
    float *W = lc_alloc(sizeof(float) * (size_t)OC * C), *b = lc_alloc(sizeof(float) * (size_t)OC);
    float *y = lc_alloc(sizeof(float) * (size_t)N * OC);
    for (size_t j = 0; j < (size_t)OC * C; j++) W[j] = (float)(0.03 * lc_gauss());
    for (int o = 0; o < OC; o++) b[o] = (float)(0.02 * lc_gauss());
    gemm_lowp_layer *w = gemm_lowp_prepare(L, W, C, b, OC, C);
    CHECK(w != NULL, "%s prepare", gemm_lowp_name(L));
    double num = 0, den = 0;
    if (w) {
        gemm_lowp(w, N, in, C, y, OC, 2);
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) {
                double s = b[o];
                for (int k = 0; k < C; k++) s += (double)in[(size_t)i * C + k] * W[(size_t)o * C + k];
                double d = y[(size_t)i * OC + o] - s;
                num += d * d;
                den += s * s;
            }
        gemm_lowp_free(w);
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    printf("%s error against fp32 on BERT-like data, %s (N %d, C %d, OC %d): relative %.3e\n", gemm_lowp_name(L), what, N, C,
           OC, rel);
    free(W);
    free(b);
    free(y);
    return rel;
}

double lc_bert_error(gemm_lowp_kind L)
{
    int N = 256;
    float *ln = lc_alloc(sizeof(float) * (size_t)N * 384), *ge = lc_alloc(sizeof(float) * (size_t)N * 1536);
    float gain[384];
    for (int c = 0; c < 384; c++) gain[c] = (float)(1.0 + 0.2 * lc_gauss());
    gain[77] = gain[301] = 12.0f; /* the outlier channels of BERT's LayerNorm outputs */
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 384; c++) ln[(size_t)i * 384 + c] = (float)(gain[c] * lc_gauss() + 0.1 * lc_gauss());
    for (size_t j = 0; j < (size_t)N * 1536; j++) {
        double x = 1.5 * lc_gauss() - 0.5;
        ge[j] = (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
    }
    double e1 = bert_case(L, "ln: LayerNorm output into the FFN up-projection", ln, N, 384, 1536);
    double e2 = bert_case(L, "gelu: GELU output into the FFN down-projection", ge, N, 1536, 384);
    free(ln);
    free(ge);
    return e1 > e2 ? e1 : e2;
}

/* 1 when name is one of the space-separated words of list. */
static int lc_in_list(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
    return 0;
}

int lc_header(gemm_lowp_kind L, cpu_kernel_family f, const char *fast_names)
{
    char d[512], why[256] = "";
    int fast = cpu_kernel_fast(f, why, sizeof why);
    printf("kernel %s: %s; runs now: %s; fast here: %s%s\n", cpu_kernel_family_name(f), cpu_kernel_describe(f, d, sizeof d),
           gemm_lowp_kernel(L), fast ? "yes" : "no: ", why);
    const char *isa = getenv("BERTC_CPU_ISA");
    if (isa && !strcmp(isa, "sse"))
        CHECK(!strcmp(gemm_lowp_kernel(L), "scalar") && !fast, "BERTC_CPU_ISA=sse runs %s", gemm_lowp_kernel(L));
    if (isa && !strcmp(isa, "avx2"))
        CHECK(strncmp(gemm_lowp_kernel(L), "avx512", 6) != 0, "BERTC_CPU_ISA=avx2 runs %s", gemm_lowp_kernel(L));
    CHECK(fast == lc_in_list(gemm_lowp_kernel(L), fast_names), "cpu_kernel_fast %d, kernel %s", fast,
          gemm_lowp_kernel(L));
    return fast;
}

int lc_case_run(lc_case *c, gemm_lowp_kind L, int N, int C, int OC)
{
    *c = (lc_case){N, C, OC, NULL, NULL, NULL, NULL, NULL};
    c->in = lc_alloc(sizeof(float) * (size_t)N * C);
    c->W = lc_alloc(sizeof(float) * (size_t)OC * C);
    c->b = lc_alloc(sizeof(float) * (size_t)OC);
    c->out = lc_alloc(sizeof(float) * (size_t)N * OC);
    for (size_t j = 0; j < (size_t)N * C; j++) c->in[j] = (float)lc_gauss();
    for (size_t j = 0; j < (size_t)OC * C; j++) c->W[j] = (float)(0.05 * lc_gauss());
    for (int o = 0; o < OC; o++) c->b[o] = (float)(0.1 * lc_gauss());
    c->w = gemm_lowp_prepare(L, c->W, C, c->b, OC, C);
    CHECK(c->w != NULL, "%s prepare %d x %d", gemm_lowp_name(L), OC, C);
    if (!c->w) {
        lc_case_free(c);
        return -1;
    }
    gemm_lowp(c->w, N, c->in, C, c->out, OC, 2);
    return 0;
}

void lc_case_free(lc_case *c)
{
    float *bufs[] = {c->in, c->W, c->b, c->out};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) free(bufs[j]);
    gemm_lowp_free(c->w);
    *c = (lc_case){0, 0, 0, NULL, NULL, NULL, NULL, NULL};
}

int lc_finish(gemm_lowp_kind L, double bound)
{
    lc_check_bits(L);
    lc_check_invariance(L);
    lc_check_n(L);
    double e = lc_bert_error(L);
    CHECK(e < bound, "%s relative error %.3e against fp32 (bound %.0e)", gemm_lowp_name(L), e, bound);
    return tu_done();
}
