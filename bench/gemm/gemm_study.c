/* One library's side of bench/gemm/gemm_study.sh, built once per library
 * (-DSTUDY_OPENBLAS, -DSTUDY_DNNL, -DSTUDY_BLIS, -DSTUDY_FIXED) so that
 * libraries that export the same BLAS symbols never share a process.
 *
 *   gemm_study info                 what library this is (core, version, threading)
 *   gemm_study rowcheck THREADS...  is a row of C the same bits whatever M?
 *   gemm_study serve MAXA MAXB MAXC timings on request, one per line of stdin
 *
 * serve allocates operands of MAXA, MAXB and MAXC floats and answers each
 * request line with one line, "T seconds" of one call (or "E why"):
 *   gemm ID M N K TA TB BETA TH       sgemm, row-major: C[M,N] = op(A) op(B) + BETA C
 *   matmul ID M N K TA TB BETA TH     oneDNN's matmul primitive (STUDY_DNNL)
 *   ffn VARIANT ID M N K TH           the FFN up-projection, out[M,N] = in[M,K] @ w[N,K]^T:
 *                                     sgemm; sgemm+bias,gelu (bias copied into C, GEMM with
 *                                     beta 1, then bertc's erf-GELU loop as its own pass);
 *                                     matmul, matmul+bias, matmul+bias+gelu (STUDY_DNNL:
 *                                     the bias and an eltwise gelu_erf post-op fused)
 * TH is the thread count. The driver (bench/gemm/gemm_study.py) sends every
 * library the same request in turn, so that a busy machine slows all of
 * them alike; a oneDNN primitive is created on the first request for its
 * shape (the driver discards that call as the warm-up) and kept until
 * another shape comes. */
#define _GNU_SOURCE /* dladdr */
#include "backend/cpu/cpu_math.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(STUDY_OPENBLAS)
#include <cblas.h>
#include <dlfcn.h>
#elif defined(STUDY_DNNL)
#include <oneapi/dnnl/dnnl.h>
#elif defined(STUDY_BLIS)
#include <blis.h>
#elif defined(STUDY_FIXED)
#include "backend/cpu/gemm_fixed.h"
#else
#error "define one of STUDY_OPENBLAS, STUDY_DNNL, STUDY_BLIS, STUDY_FIXED"
#endif

static const char *lib_name = "lib";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "gemm_study: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static void fill(float *x, size_t n, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2 - 1);
    }
}

static void set_threads(int th)
{
    omp_set_num_threads(th);
#if defined(STUDY_OPENBLAS)
    openblas_set_num_threads(th);
#elif defined(STUDY_BLIS)
    bli_thread_set_num_threads(th);
#endif
}

/* ------------------------------------------------------------------------
 * sgemm, row-major, through each library's own entry point. */

#if defined(STUDY_FIXED)
static int fixed_threads = 1;
#endif
#if defined(STUDY_DNNL)
static int use_matmul;
static void matmul_gemm(int ta, int tb, int M, int N, int K, const float *A, const float *B, float *C);
#endif

static void sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc)
{
#if defined(STUDY_OPENBLAS)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
#elif defined(STUDY_DNNL)
    if (use_matmul) {
        matmul_gemm(ta, tb, M, N, K, A, B, C); /* alpha 1, beta 0, dense ld: all rowcheck asks */
        return;
    }
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#elif defined(STUDY_BLIS)
    /* op(A) stored row-major: element (i, k) at i * lda + k, or transposed. */
    bli_sgemm(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, M, N, K, &alpha,
              (float *)A, lda, 1, (float *)B, ldb, 1, &beta, C, ldc, 1);
#elif defined(STUDY_FIXED)
    gemm_fixed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, fixed_threads);
#endif
}

struct shape {
    char id[96];
    int M, N, K, ta, tb;
    float beta;
};

/* Operands of every shape the driver asks for, filled once. */
static float *bufA, *bufB, *bufC, *bufBias;
static size_t maxA, maxB, maxC;

static void alloc_operands(size_t a, size_t b, size_t c)
{
    maxA = a, maxB = b, maxC = c;
    bufA = xmalloc(a * sizeof(float));
    bufB = xmalloc(b * sizeof(float));
    bufC = xmalloc(c * sizeof(float));
    bufBias = xmalloc(8192 * sizeof(float));
    fill(bufA, a, 1);
    fill(bufB, b, 2);
    fill(bufC, c, 3);
    fill(bufBias, 8192, 4);
}

typedef void (*call_fn)(void *ctx);

static double seconds(call_fn fn, void *ctx)
{
    double t = now();
    fn(ctx);
    return now() - t;
}

static void call_sgemm(void *vs)
{
    const struct shape *s = vs;
    sgemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, bufA, s->ta ? s->M : s->K, bufB, s->tb ? s->K : s->N, s->beta, bufC,
          s->N);
}

/* ------------------------------------------------------------------------
 * bertc's GELU (the CPU backend's loop: cpu_erff, exact form), in place. */

CPU_INLINE void gelu_rows_code(float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = v * 0.5f * (1.0f + cpu_erff(v * 0.70710678118654752440f));
    }
}
CPU_VARIANTS(CPU_K_GELU, gelu_rows, (float *x, size_t n), (x, n))

static void gelu_inplace(float *x, size_t n)
{
    long chunks = (long)((n + 4095) / 4096);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t i0 = (size_t)c * 4096;
        gelu_rows(x + i0, n - i0 < 4096 ? n - i0 : 4096);
    }
}

/* out[M,N] = bias, then the GEMM accumulates onto it (bertc's matmul), then
 * GELU as its own pass. */
static void call_sgemm_bias_gelu(void *vs)
{
    const struct shape *s = vs;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < s->M; i++) memcpy(bufC + (size_t)i * s->N, bufBias, sizeof(float) * s->N);
    sgemm(0, 1, s->M, s->N, s->K, 1.0f, bufA, s->K, bufB, s->K, 1.0f, bufC, s->N);
    gelu_inplace(bufC, (size_t)s->M * s->N);
}

/* ------------------------------------------------------------------------
 * oneDNN's matmul primitive. */

#if defined(STUDY_DNNL)
#define DNNL_OK(x)                                                                      \
    do {                                                                                \
        dnnl_status_t st_ = (x);                                                        \
        if (st_ != dnnl_success) {                                                      \
            fprintf(stderr, "gemm_study: %s failed (%d) at line %d\n", #x, (int)st_, __LINE__); \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

struct mm {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst;
    int with_bias;
    char impl[64];
};

static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, int transposed)
{
    dnnl_dims_t d = {rows, cols};
    DNNL_OK(dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_f32, transposed ? dnnl_ba : dnnl_ab));
}

/* C[M,N] = op(A)[M,K] @ op(B)[K,N] (+ bias[N]) (+ C when sum) (then erf GELU when gelu). */
static void mm_make_on(struct mm *m, const struct shape *s, int with_bias, int gelu, float *biasp, const float *A,
                       const float *B, float *C)
{
    dnnl_memory_desc_t a, b, bi, c;
    md_2d(&a, s->M, s->K, s->ta);
    md_2d(&b, s->K, s->N, s->tb);
    md_2d(&c, s->M, s->N, 0);
    md_2d(&bi, 1, s->N, 0);
    dnnl_matmul_desc_t d;
    DNNL_OK(dnnl_matmul_desc_init(&d, &a, &b, with_bias ? &bi : NULL, &c));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    dnnl_post_ops_t po;
    DNNL_OK(dnnl_post_ops_create(&po));
    if (s->beta != 0.0f) DNNL_OK(dnnl_post_ops_append_sum(po, s->beta));
    if (gelu) DNNL_OK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f));
    DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL));
    const char *impl = "?";
    DNNL_OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    snprintf(m->impl, sizeof m->impl, "%s", impl);
    DNNL_OK(dnnl_primitive_create(&m->prim, pd));
    DNNL_OK(dnnl_memory_create(&m->src, &a, eng, (void *)A));
    DNNL_OK(dnnl_memory_create(&m->wei, &b, eng, (void *)B));
    DNNL_OK(dnnl_memory_create(&m->dst, &c, eng, C));
    DNNL_OK(dnnl_memory_create(&m->bias, &bi, eng, biasp));
    m->with_bias = with_bias;
    dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
}

static void mm_make(struct mm *m, const struct shape *s, int with_bias, int gelu)
{
    mm_make_on(m, s, with_bias, gelu, bufBias, bufA, bufB, bufC);
}

static void mm_free(struct mm *m)
{
    dnnl_primitive_destroy(m->prim);
    dnnl_memory_destroy(m->src);
    dnnl_memory_destroy(m->wei);
    dnnl_memory_destroy(m->bias);
    dnnl_memory_destroy(m->dst);
}

static void call_mm(void *vm)
{
    struct mm *m = vm;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m->src}, {DNNL_ARG_WEIGHTS, m->wei}, {DNNL_ARG_DST, m->dst},
                               {DNNL_ARG_BIAS, m->bias}};
    DNNL_OK(dnnl_primitive_execute(m->prim, strm, m->with_bias ? 4 : 3, args));
    DNNL_OK(dnnl_stream_wait(strm));
}

/* A one-off primitive per call: rowcheck's products through the matmul primitive. */
static void matmul_gemm(int ta, int tb, int M, int N, int K, const float *A, const float *B, float *C)
{
    struct shape s = {"rowcheck", M, N, K, ta, tb, 0.0f};
    struct mm m;
    mm_make_on(&m, &s, 0, 0, NULL, A, B, C);
    call_mm(&m);
    mm_free(&m);
}

static void dnnl_start(void)
{
    DNNL_OK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    DNNL_OK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
}

/* The primitive for the last shape asked for, kept for the next request. */
static struct mm cur;
static char cur_key[160];

static double time_matmul(const char *key, const struct shape *s, int with_bias, int gelu)
{
    if (strcmp(key, cur_key) != 0) {
        if (cur_key[0]) mm_free(&cur);
        mm_make(&cur, s, with_bias, gelu);
        snprintf(cur_key, sizeof cur_key, "%s", key);
    }
    return seconds(call_mm, &cur);
}
#endif

/* ------------------------------------------------------------------------
 * Is row r of C the same bits when computed inside M = 3072 rows as alone
 * (M = 1) and inside M = 7? Forward NT (K = 384, N = 1536) and data-grad NN
 * (K = 1536, N = 384) products of minilm's FFN. */

static void run_rowcheck(int th)
{
    enum { MBIG = 3072, CH = 384, FF = 1536 };
    static const int rows[] = {0, 1, 5, 1000, 3071};
    set_threads(th);
#if defined(STUDY_FIXED)
    fixed_threads = th;
#endif
    float *A = xmalloc(sizeof(float) * MBIG * FF), *B = xmalloc(sizeof(float) * FF * CH);
    float *big = xmalloc(sizeof(float) * MBIG * FF), *small = xmalloc(sizeof(float) * 7 * FF);
    fill(A, (size_t)MBIG * FF, 5);
    fill(B, (size_t)FF * CH, 6);
    for (int nt = 0; nt < 2; nt++) {
        int N = nt == 0 ? FF : CH, K = nt == 0 ? CH : FF, tb = nt == 0;
        sgemm(0, tb, MBIG, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, big, N);
        int same1 = 0, same7 = 0, n = sizeof rows / sizeof rows[0];
        for (int r = 0; r < n; r++) {
            sgemm(0, tb, 1, N, K, 1.0f, A + (size_t)rows[r] * K, K, B, tb ? K : N, 0.0f, small, N);
            same1 += memcmp(small, big + (size_t)rows[r] * N, sizeof(float) * N) == 0;
            int r0 = rows[r] >= 3 ? rows[r] - 3 : 0; /* the row at 3 of 7 (or nearer the top) */
            if (r0 + 7 > MBIG) r0 = MBIG - 7;
            sgemm(0, tb, 7, N, K, 1.0f, A + (size_t)r0 * K, K, B, tb ? K : N, 0.0f, small, N);
            same7 += memcmp(small + (size_t)(rows[r] - r0) * N, big + (size_t)rows[r] * N, sizeof(float) * N) == 0;
        }
        printf("W %s %s %d %d/%d %d/%d\n", lib_name, nt == 0 ? "fwd-NT(M,1536,384)" : "dgrad-NN(M,384,1536)", th,
               same1, n, same7, n);
    }
    free(A);
    free(B);
    free(big);
    free(small);
}

static void print_info(void)
{
#if defined(STUDY_OPENBLAS)
    Dl_info dl;
    const char *path = dladdr((void *)cblas_sgemm, &dl) && dl.dli_fname ? dl.dli_fname : "?";
    int par = openblas_get_parallel();
    printf("N %s core %s; %s; threading %s; %s\n", lib_name, openblas_get_corename(), openblas_get_config(),
           par == 2 ? "OpenMP" : par == 1 ? "pthreads" : "none", path);
#elif defined(STUDY_DNNL)
    const dnnl_version_t *v = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    printf("N %s oneDNN %d.%d.%d (%s), threading %s, effective ISA code 0x%x\n", lib_name, v->major, v->minor,
           v->patch, v->hash, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", (unsigned)isa);
#elif defined(STUDY_BLIS)
    printf("N %s BLIS %s, sub-configuration %s\n", lib_name, bli_info_get_version_str(),
           bli_arch_string(bli_arch_query_id()));
#elif defined(STUDY_FIXED)
    printf("N %s gemm_fixed kernel %s\n", lib_name, gemm_isa_name(gemm_fixed_isa()));
#endif
}

/* One request line; prints its answer. */
static void serve_one(char *line)
{
    char kind[16], variant[32], id[96];
    struct shape sh = {"", 0, 0, 0, 0, 0, 0.0f};
    int th = 1, ok;
    if (sscanf(line, "%15s", kind) != 1) return;
    if (!strcmp(kind, "ffn")) {
        ok = sscanf(line, "%*s %31s %95s %d %d %d %d", variant, id, &sh.M, &sh.N, &sh.K, &th) == 6;
        sh.tb = 1;
    } else {
        ok = sscanf(line, "%*s %95s %d %d %d %d %d %f %d", id, &sh.M, &sh.N, &sh.K, &sh.ta, &sh.tb, &sh.beta, &th) == 8;
        snprintf(variant, sizeof variant, "%s", kind);
    }
    if (!ok || th < 1 || sh.M < 1 || sh.N < 1 || sh.K < 1) {
        printf("E bad request: %s", line);
        return;
    }
    if ((size_t)sh.M * sh.K > maxA || (size_t)sh.K * sh.N > maxB || (size_t)sh.M * sh.N > maxC || sh.N > 8192) {
        printf("E operands too small for %s\n", id);
        return;
    }
    snprintf(sh.id, sizeof sh.id, "%s", id);
    set_threads(th);
#if defined(STUDY_FIXED)
    fixed_threads = th;
#endif
    double t = -1;
    if (!strcmp(kind, "gemm") || (!strcmp(kind, "ffn") && !strcmp(variant, "sgemm"))) {
        t = seconds(call_sgemm, &sh);
    } else if (!strcmp(kind, "ffn") && !strcmp(variant, "sgemm+bias,gelu")) {
        t = seconds(call_sgemm_bias_gelu, &sh);
    }
#if defined(STUDY_DNNL)
    else {
        char key[160];
        snprintf(key, sizeof key, "%s %s %d", variant, id, th);
        if (!strcmp(variant, "matmul")) t = time_matmul(key, &sh, 0, 0);
        if (!strcmp(variant, "matmul+bias")) t = time_matmul(key, &sh, 1, 0);
        if (!strcmp(variant, "matmul+bias+gelu")) t = time_matmul(key, &sh, 1, 1);
    }
#endif
    if (t < 0)
        printf("E %s: not in this library\n", variant);
    else
        printf("T %.9f\n", t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s info | rowcheck THREADS... | serve MAXA MAXB MAXC\n", argv[0]);
        return 2;
    }
    if (getenv("STUDY_LIB")) lib_name = getenv("STUDY_LIB");
#if defined(STUDY_FIXED)
    /* The AVX2-only level, as bertc runs gemm_fixed under BERTC_CPU_ISA=avx2. */
    const char *cap = getenv("BERTC_CPU_ISA");
    if (cap && !strcmp(cap, "avx2")) gemm_fixed_set_isa(GEMM_ISA_AVX2);
#endif
#if defined(STUDY_DNNL)
    dnnl_start();
#endif
    if (!strcmp(argv[1], "info")) {
        print_info();
        return 0;
    }
    if (!strcmp(argv[1], "rowcheck")) {
        for (int a = 2; a < argc; a++) run_rowcheck(atoi(argv[a]));
#if defined(STUDY_DNNL)
        use_matmul = 1;
        lib_name = "dnnl-matmul";
        for (int a = 2; a < argc; a++) run_rowcheck(atoi(argv[a]));
#endif
        return 0;
    }
    if (!strcmp(argv[1], "serve") && argc == 5) {
        alloc_operands(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
        char line[512];
        while (fgets(line, sizeof line, stdin)) {
            serve_one(line);
            fflush(stdout);
        }
        return 0;
    }
    fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
    return 2;
}
