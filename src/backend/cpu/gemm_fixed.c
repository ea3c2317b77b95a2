/* gemm_fixed (see gemm_fixed.h): GotoBLAS-style blocking around one
 * micro-kernel per ISA.
 *
 * op(B) is packed whole, once per call, into column panels of NR columns
 * (panel p holds op(B)[k][p*NR .. p*NR+NR) for every k, zero-padded past N).
 * The output is cut into tasks of MC rows x NC columns, handed to threads;
 * a task walks K in blocks of at most KC, packs its rows of op(A) for the
 * block into row panels of MR rows (zero-padded past M), and runs the
 * micro-kernel on every MR x NR tile: for each NR panel of B (kept in L1)
 * over every MR panel of A (kept in L2). Between K blocks a tile's partial
 * sums go to a per-thread buffer and the next block's kernel continues the
 * same FMA chains from them; the last block applies alpha and beta. Tiles
 * that stick out of C are computed whole in a scratch tile and copied.
 *
 * None of this changes an element's arithmetic: block sizes, thread counts
 * and tile positions only decide where and when its chain runs. The
 * kernels differ only in vector width (gemm_fixed_kernel.inc is the one
 * source of all three); the scalar one computes 16-float arrays with fmaf
 * in the AVX-512 kernel's tile shape, so that shape's packing, tails and
 * partial sums run on every machine. */
#include "backend/cpu/gemm_fixed.h"

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_ws.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86 1
#include <immintrin.h>
#endif

/* The epilogue's products and sums must stay separate roundings: no
 * contraction of alpha * s + beta * c into an FMA. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

struct gemm_epi {
    float alpha, beta;
};

typedef void (*gemm_tile_fn)(int kc, const float *a, const float *b, const float *pin, float *out, long ldo,
                             const struct gemm_epi *epi);

/* A kernel and its blocking: tile MR x NR; a task is at most MC rows (a
 * multiple of MR) by NC columns (a multiple of NR); a K block at most KC
 * (the KC x NR panel of B stays in L1). */
struct gemm_kern {
    gemm_tile_fn tile;
    int mr, nr, mc, nc, kc;
    /* Packs one full panel of mr rows of a non-transposed A (row stride
     * lda) over kc, writing up to 16 floats past it; NULL: the plain loop. */
    void (*pack_a_panel)(float *dst, const float *src, long lda, int kc);
};

enum { TILE_MAX = 12 * 32, TILE_MR_MAX = 12 };

/* ------------------------------------------------------------------------
 * Kernels. */

/* 16 floats as an array: the AVX-512 kernel's arithmetic, lane by lane. */
typedef struct {
    float v[16];
} gemm_v16;

static inline gemm_v16 v16_zero(void)
{
    gemm_v16 r;
    for (int l = 0; l < 16; l++) r.v[l] = 0.0f;
    return r;
}
static inline gemm_v16 v16_load(const float *p)
{
    gemm_v16 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
static inline void v16_store(float *p, gemm_v16 x)
{
    memcpy(p, x.v, sizeof x.v);
}
static inline gemm_v16 v16_set1(float x)
{
    gemm_v16 r;
    for (int l = 0; l < 16; l++) r.v[l] = x;
    return r;
}
static inline gemm_v16 v16_fma(gemm_v16 a, gemm_v16 b, gemm_v16 c)
{
    for (int l = 0; l < 16; l++) c.v[l] = fmaf(a.v[l], b.v[l], c.v[l]);
    return c;
}
static inline gemm_v16 v16_mul(gemm_v16 a, gemm_v16 b)
{
    for (int l = 0; l < 16; l++) a.v[l] = a.v[l] * b.v[l];
    return a;
}
static inline gemm_v16 v16_add(gemm_v16 a, gemm_v16 b)
{
    for (int l = 0; l < 16; l++) a.v[l] = a.v[l] + b.v[l];
    return a;
}

#define GK_NAME tile_scalar_12x32
#define GK_ATTR
#define GK_V gemm_v16
#define GK_VW 16
#define GK_MR 12
#define GK_NV 2
#define GK_ZERO() v16_zero()
#define GK_LOAD(p) v16_load(p)
#define GK_STORE(p, x) v16_store(p, x)
#define GK_BCAST(p) v16_set1(*(p))
#define GK_SET1(x) v16_set1(x)
#define GK_FMA(a, b, c) v16_fma(a, b, c)
#define GK_MUL(a, b) v16_mul(a, b)
#define GK_ADD(a, b) v16_add(a, b)
#include "backend/cpu/gemm_fixed_kernel.inc"

#if GEMM_X86
/* 6 x 16: 12 ymm accumulators, 2 for the row of B, 1 for the broadcast. */
#define GK_NAME tile_avx2_6x16
#define GK_ATTR __attribute__((target("avx2,fma")))
#define GK_V __m256
#define GK_VW 8
#define GK_MR 6
#define GK_NV 2
#define GK_ZERO() _mm256_setzero_ps()
#define GK_LOAD(p) _mm256_loadu_ps(p)
#define GK_STORE(p, x) _mm256_storeu_ps(p, x)
#define GK_BCAST(p) _mm256_broadcast_ss(p)
#define GK_SET1(x) _mm256_set1_ps(x)
#define GK_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define GK_MUL(a, b) _mm256_mul_ps(a, b)
#define GK_ADD(a, b) _mm256_add_ps(a, b)
#include "backend/cpu/gemm_fixed_kernel.inc"

/* 12 x 32: 24 zmm accumulators, 2 for the row of B, 1 for the broadcast. */
#define GK_NAME tile_avx512_12x32
#define GK_ATTR __attribute__((target("avx512f,avx2,fma")))
#define GK_V __m512
#define GK_VW 16
#define GK_MR 12
#define GK_NV 2
#define GK_ZERO() _mm512_setzero_ps()
#define GK_LOAD(p) _mm512_loadu_ps(p)
#define GK_STORE(p, x) _mm512_storeu_ps(p, x)
#define GK_BCAST(p) _mm512_set1_ps(*(p))
#define GK_SET1(x) _mm512_set1_ps(x)
#define GK_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define GK_MUL(a, b) _mm512_mul_ps(a, b)
#define GK_ADD(a, b) _mm512_add_ps(a, b)
#include "backend/cpu/gemm_fixed_kernel.inc"
#endif

#if GEMM_X86
/* Six rows: 8 k at a time, an 8 x 8 transpose (two rows of zeros) in
 * registers; each column of 8 is stored at dst + 6 k, the next one
 * overwriting its two zeros. */
__attribute__((target("avx2"))) static void pack_a_panel_avx2_6(float *dst, const float *src, long lda, int kc)
{
    int k = 0;
    __m256 z = _mm256_setzero_ps();
    for (; k + 8 <= kc; k += 8, dst += 48) {
        __m256 r0 = _mm256_loadu_ps(src + k), r1 = _mm256_loadu_ps(src + lda + k);
        __m256 r2 = _mm256_loadu_ps(src + 2 * lda + k), r3 = _mm256_loadu_ps(src + 3 * lda + k);
        __m256 r4 = _mm256_loadu_ps(src + 4 * lda + k), r5 = _mm256_loadu_ps(src + 5 * lda + k);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        __m256 s4 = _mm256_shuffle_ps(t4, z, 0x44), s5 = _mm256_shuffle_ps(t4, z, 0xEE);
        __m256 s6 = _mm256_shuffle_ps(t5, z, 0x44), s7 = _mm256_shuffle_ps(t5, z, 0xEE);
        _mm256_storeu_ps(dst + 0, _mm256_permute2f128_ps(s0, s4, 0x20));
        _mm256_storeu_ps(dst + 6, _mm256_permute2f128_ps(s1, s5, 0x20));
        _mm256_storeu_ps(dst + 12, _mm256_permute2f128_ps(s2, s6, 0x20));
        _mm256_storeu_ps(dst + 18, _mm256_permute2f128_ps(s3, s7, 0x20));
        _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(s0, s4, 0x31));
        _mm256_storeu_ps(dst + 30, _mm256_permute2f128_ps(s1, s5, 0x31));
        _mm256_storeu_ps(dst + 36, _mm256_permute2f128_ps(s2, s6, 0x31));
        _mm256_storeu_ps(dst + 42, _mm256_permute2f128_ps(s3, s7, 0x31));
    }
    for (; k < kc; k++, dst += 6)
        for (int ii = 0; ii < 6; ii++) dst[ii] = src[ii * lda + k];
}
#endif

static const struct gemm_kern kern_scalar = {tile_scalar_12x32, 12, 32, 144, 768, 128, NULL};
#if GEMM_X86
static const struct gemm_kern kern_avx2 = {tile_avx2_6x16, 6, 16, 144, 768, 256, pack_a_panel_avx2_6};
static const struct gemm_kern kern_avx512 = {tile_avx512_12x32, 12, 32, 144, 768, 128, NULL};
#endif

/* ------------------------------------------------------------------------
 * ISA choice. */

static atomic_int isa_cap = GEMM_ISA_AVX512;

/* The kernel cpu_isa.h decided (the level's, after BERTC_CPU_ISA). */
static enum gemm_isa isa_detect(void)
{
#if GEMM_X86
    cpu_isa_level l = cpu_kernel_level(CPU_K_GEMM_FIXED);
    if (l >= CPU_ISA_AVX512) return GEMM_ISA_AVX512;
    if (l >= CPU_ISA_AVX2) return GEMM_ISA_AVX2;
#endif
    return GEMM_ISA_SCALAR;
}

void gemm_fixed_set_isa(enum gemm_isa max)
{
    atomic_store(&isa_cap, (int)max);
}

enum gemm_isa gemm_fixed_isa(void)
{
    enum gemm_isa hw = isa_detect(), cap = (enum gemm_isa)atomic_load(&isa_cap);
    return cap < hw ? cap : hw;
}

const char *gemm_isa_name(enum gemm_isa isa)
{
    switch (isa) {
    case GEMM_ISA_AVX512: return "avx512";
    case GEMM_ISA_AVX2: return "avx2";
    default: return "scalar";
    }
}

static const struct gemm_kern *kern_for(enum gemm_isa isa)
{
#if GEMM_X86
    if (isa == GEMM_ISA_AVX512) return &kern_avx512;
    if (isa == GEMM_ISA_AVX2) return &kern_avx2;
#endif
    (void)isa;
    return &kern_scalar;
}

/* ------------------------------------------------------------------------
 * The plain loop: the definition, and the path when memory runs out. */

struct gemm_args {
    int transa, transb, M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
};

static float epilogue(float s, float old, float alpha, float beta)
{
    float o = alpha == 1.0f ? s : alpha * s;
    if (beta != 0.0f) o = o + (beta == 1.0f ? old : beta * old);
    return o;
}

static void gemm_plain(const struct gemm_args *g)
{
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            float s = 0.0f;
            for (int k = 0; k < g->K; k++) {
                float a = g->transa ? g->A[(size_t)k * g->lda + i] : g->A[(size_t)i * g->lda + k];
                float b = g->transb ? g->B[(size_t)j * g->ldb + k] : g->B[(size_t)k * g->ldb + j];
                s = fmaf(a, b, s);
            }
            float *c = g->C + (size_t)i * g->ldc + j;
            *c = epilogue(s, g->beta != 0.0f ? *c : 0.0f, g->alpha, g->beta);
        }
}

/* ------------------------------------------------------------------------
 * Packing. */

/* d[0 .. w) = s[0 .. n), zeros after: a fixed-size copy for the full
 * widths, which the compiler inlines (a memcpy call per row of a panel
 * costs more than the copy). */
static inline void copy_row(float *restrict d, const float *restrict s, int n, int w)
{
    if (n == w) {
        switch (w) {
        case 6: memcpy(d, s, 6 * sizeof(float)); return;
        case 12: memcpy(d, s, 12 * sizeof(float)); return;
        case 16: memcpy(d, s, 16 * sizeof(float)); return;
        case 32: memcpy(d, s, 32 * sizeof(float)); return;
        default: break;
        }
    }
    for (int i = 0; i < n; i++) d[i] = s[i];
    for (int i = n; i < w; i++) d[i] = 0.0f;
}

/* Panels p0 .. p1 of op(B): panel p holds dst[(p * K + k) * nr + jj] =
 * op(B)[k][p * nr + jj], zero past N. */
static void pack_b(float *restrict dst, const struct gemm_args *g, int nr, int p0, int p1)
{
    int K = g->K;
    if (!g->transb) {
        /* Along the rows of B, all panels at once: the reads run contiguous. */
        for (int k = 0; k < K; k++) {
            const float *src = g->B + (size_t)k * g->ldb;
            for (int p = p0; p < p1; p++) {
                int nj = g->N - p * nr < nr ? g->N - p * nr : nr;
                copy_row(dst + ((size_t)p * K + k) * nr, src + (size_t)p * nr, nj, nr);
            }
        }
        return;
    }
    for (int p = p0; p < p1; p++) {
        int j0 = p * nr, nj = g->N - j0 < nr ? g->N - j0 : nr;
        float *d = dst + (size_t)p * K * nr;
        if (nj < nr) memset(d, 0, (size_t)K * nr * sizeof(float));
        /* op(B)[k][j] = B[j][k]: rows of B are read along k, in k blocks so
         * that the block of the panel being written stays in L1. */
        enum { KB = 64 };
        for (int k0 = 0; k0 < K; k0 += KB) {
            int k1 = k0 + KB < K ? k0 + KB : K;
            for (int jj = 0; jj < nj; jj++) {
                const float *src = g->B + (size_t)(j0 + jj) * g->ldb;
                for (int k = k0; k < k1; k++) d[(size_t)k * nr + jj] = src[k];
            }
        }
    }
}

/* Rows i0 .. i0+mi of op(A), columns k0 .. k0+kc, as ceil(mi / mr) panels
 * of kc * mr floats: dst[p][k][ii] = op(A)[i0 + p*mr + ii][k0 + k], zero
 * past mi. May write 16 floats past the block. */
static void pack_a_block(float *restrict dst, const struct gemm_args *g, const struct gemm_kern *kr, int i0, int mi,
                         int k0, int kc)
{
    int mr = kr->mr;
    for (int r = 0; r < mi; r += mr, dst += (size_t)kc * mr) {
        int nrow = mi - r < mr ? mi - r : mr;
        if (!g->transa && nrow == mr && kr->pack_a_panel) {
            kr->pack_a_panel(dst, g->A + (size_t)(i0 + r) * g->lda + k0, g->lda, kc);
        } else if (g->transa) {
            for (int k = 0; k < kc; k++) {
                const float *src = g->A + (size_t)(k0 + k) * g->lda + i0 + r;
                copy_row(dst + (size_t)k * mr, src, nrow, mr);
            }
        } else {
            /* k outer: the stores run contiguous, the loads along mr rows. */
            const float *src[TILE_MR_MAX];
            for (int ii = 0; ii < mr; ii++) src[ii] = g->A + (size_t)(i0 + r + (ii < nrow ? ii : 0)) * g->lda + k0;
            for (int k = 0; k < kc; k++) {
                float *d = dst + (size_t)k * mr;
                for (int ii = 0; ii < nrow; ii++) d[ii] = src[ii][k];
                for (int ii = nrow; ii < mr; ii++) d[ii] = 0.0f;
            }
        }
    }
}

/* ------------------------------------------------------------------------
 * The blocked product. */

struct gemm_plan {
    const struct gemm_kern *kr;
    int mc, nc;   /* task size: rows (multiple of mr), columns (multiple of nr) */
    int rb, cb;   /* tasks: row blocks x column blocks */
    int kb, kcb;  /* K blocks and their length (the last may be shorter) */
    int npanels;  /* NR panels of op(B) */
    size_t a_floats, p_floats, b_floats;
};

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

static size_t round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static void plan_make(struct gemm_plan *pl, const struct gemm_kern *kr, int M, int N, int K, int nthr)
{
    pl->kr = kr;
    pl->kb = K > kr->kc ? ceil_div(K, kr->kc) : 1;
    pl->kcb = ceil_div(K, pl->kb);
    int rb = ceil_div(M, kr->mc), cb = ceil_div(N, kr->nc);
    if (nthr > 1) {
        /* A multiple of the thread count, by more row blocks first (each
         * task then reuses all its panels of B), else by column blocks. */
        int want = ceil_div(rb * cb, nthr) * nthr, max_rb = ceil_div(M, kr->mr), max_cb = ceil_div(N, kr->nr);
        if (ceil_div(want, cb) <= max_rb) {
            rb = ceil_div(want, cb);
        } else {
            rb = max_rb;
            cb = ceil_div(want, rb) < max_cb ? ceil_div(want, rb) : max_cb;
        }
    }
    pl->mc = ceil_div(ceil_div(M, rb), kr->mr) * kr->mr;
    pl->nc = ceil_div(ceil_div(N, cb), kr->nr) * kr->nr;
    pl->rb = ceil_div(M, pl->mc);
    pl->cb = ceil_div(N, pl->nc);
    pl->npanels = ceil_div(N, kr->nr);
    pl->b_floats = round16((size_t)pl->npanels * kr->nr * (K > 0 ? K : 1));
    pl->a_floats = round16((size_t)pl->mc * (pl->kcb > 0 ? pl->kcb : 1) + 16);
    pl->p_floats = pl->kb > 1 ? round16((size_t)pl->mc * pl->nc) : 0;
}

/* One task: rows ri * mc .., columns ci * nc .. of C. */
static void run_task(const struct gemm_args *g, const struct gemm_plan *pl, const float *bp, float *ap, float *pp,
                     float *scratch, int ri, int ci)
{
    const struct gemm_kern *kr = pl->kr;
    int mr = kr->mr, nr = kr->nr;
    int i0 = ri * pl->mc, mi = g->M - i0 < pl->mc ? g->M - i0 : pl->mc;
    int j0 = ci * pl->nc, nj = g->N - j0 < pl->nc ? g->N - j0 : pl->nc;
    int nip = ceil_div(mi, mr), njp = ceil_div(nj, nr);
    struct gemm_epi epi = {g->alpha, g->beta};
    for (int b = 0; b < pl->kb; b++) {
        int k0 = b * pl->kcb, kc = g->K - k0 < pl->kcb ? g->K - k0 : pl->kcb;
        int first = b == 0, last = b == pl->kb - 1;
        pack_a_block(ap, g, kr, i0, mi, k0, kc);
        for (int jp = 0; jp < njp; jp++) {
            const float *bpan = bp + ((size_t)(j0 / nr + jp) * g->K + k0) * nr;
            int cols = nj - jp * nr < nr ? nj - jp * nr : nr;
            for (int ip = 0; ip < nip; ip++) {
                const float *apan = ap + (size_t)ip * kc * mr;
                float *part = pp ? pp + ((size_t)jp * nip + ip) * mr * nr : NULL;
                const float *pin = first ? NULL : part;
                if (!last) {
                    kr->tile(kc, apan, bpan, pin, part, nr, NULL);
                    continue;
                }
                int rows = mi - ip * mr < mr ? mi - ip * mr : mr;
                float *c = g->C + (size_t)(i0 + ip * mr) * g->ldc + j0 + jp * nr;
                if (rows == mr && cols == nr) {
                    kr->tile(kc, apan, bpan, pin, c, g->ldc, &epi);
                    continue;
                }
                if (g->beta != 0.0f)
                    for (int i = 0; i < rows; i++)
                        memcpy(scratch + i * nr, c + (size_t)i * g->ldc, (size_t)cols * sizeof(float));
                kr->tile(kc, apan, bpan, pin, scratch, nr, &epi);
                for (int i = 0; i < rows; i++)
                    memcpy(c + (size_t)i * g->ldc, scratch + i * nr, (size_t)cols * sizeof(float));
            }
        }
    }
}

void gemm_fixed(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc, int nthreads)
{
    if (M <= 0 || N <= 0) return;
    if (K < 0) K = 0;
    struct gemm_args g = {transa, transb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc};
    /* Below this many multiply-adds a parallel region costs more than it saves. */
    int nthr = nthreads > 1 && (double)M * N * K >= 1 << 18 ? nthreads : 1;
    struct gemm_plan pl;
    plan_make(&pl, kern_for(gemm_fixed_isa()), M, N, K, nthr);
    int ntask = pl.rb * pl.cb;
    if (nthr > ntask) nthr = ntask;

    size_t per_thr = pl.a_floats + pl.p_floats + TILE_MAX;
    size_t total = pl.b_floats + (size_t)nthr * per_thr;
    float *mem = gemm_ws_get(total * sizeof(float));
    if (!mem) {
        gemm_plain(&g);
        return;
    }
    float *bp = mem, *thr_mem = mem + pl.b_floats;

    if (nthr == 1) {
        pack_b(bp, &g, pl.kr->nr, 0, pl.npanels);
        float *ap = thr_mem, *pp = pl.p_floats ? ap + pl.a_floats : NULL, *scratch = ap + pl.a_floats + pl.p_floats;
        memset(scratch, 0, TILE_MAX * sizeof(float));
        for (int t = 0; t < ntask; t++) run_task(&g, &pl, bp, ap, pp, scratch, t / pl.cb, t % pl.cb);
        return;
    }

#pragma omp parallel num_threads(nthr)
    {
        float *ap = thr_mem + (size_t)omp_get_thread_num() * per_thr;
        float *pp = pl.p_floats ? ap + pl.a_floats : NULL, *scratch = ap + pl.a_floats + pl.p_floats;
        memset(scratch, 0, TILE_MAX * sizeof(float));
        int nt = omp_get_num_threads(), it = omp_get_thread_num();
        pack_b(bp, &g, pl.kr->nr, (int)((long)pl.npanels * it / nt), (int)((long)pl.npanels * (it + 1) / nt));
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++) run_task(&g, &pl, bp, ap, pp, scratch, t / pl.cb, t % pl.cb);
    }
}
