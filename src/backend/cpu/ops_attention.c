/* Self-attention of one layer on the CPU, as transformers' eager attention
 * computes it, one (window, head) pair per loop iteration:
 *
 *   S  = (q k^T) * HS^-0.5 + (mask == 0 ? -FLT_MAX : 0)   (len,len)
 *   P  = softmax(S) over keys            saved in probs
 *   P' = P * dropout multipliers         (only when p > 0)
 *   out = P' v                           (len,HS), written into (N,C)
 *
 * A padded batch is the case of windows of length T at rows b*T with a key
 * mask; a packed one has no mask, each window over its own length. A masked
 * key contributes exp(-FLT_MAX - max) = 0 to the softmax's sum, in the same
 * lane as a packed window's missing key, so a packed window's probabilities
 * are those of its padded twin at every real position.
 *
 * q, k, v, out are (N,C) with head h in columns h*HS .. h*HS+HS-1, so the
 * GEMMs read them in place with leading dimension C. The (b,h) pairs are
 * handed to threads one at a time and the GEMMs run single-threaded inside
 * the parallel region (cpu_blas_serial_begin), so every output element has
 * one writer and a fixed summation order.
 *
 * Each (b,h) is done a block of rows at a time, in the thread's two scratch
 * blocks, which stay in cache: the forward's scores S (softmax works on
 * them in place) and P', the backward's dS and P'. probs (B NH len^2, far
 * larger than the caches) is written once, with streaming stores, as the
 * last pass of softmax, and read once by the backward; the caller's
 * backward scratch is not used.
 * The mask is a pure function of (rng, padded flat index into probs): the
 * forward draws it as keep bits (one 64-bit-aligned run per row of probs)
 * into the mask cache (mask_cache.c), and the backward reads it there, or
 * draws it again where the cache no longer holds it. */
#include "backend/cpu/cpu_math.h"

#include "backend/cpu/cpu.h"
#include "backend/cpu/att_fixed.h"
#include "backend/cpu/gemm_ws.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#ifdef CPU_HAVE_AVX2_MATH
/* x[j] = exp(x[j] - m) for the whole vectors of the row, each added to
 * acc's lanes as it is made (the lanes of softmax_row_exp's sum); returns
 * where it stopped. */
__attribute__((target("avx2"))) static int exp_sum_avx2(float *x, float m, int T, float acc[8])
{
    __m256 M = _mm256_set1_ps(m), a = _mm256_setzero_ps();
    int s = 0;
    for (; s + 8 <= T; s += 8) {
        __m256 e = cpu_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + s), M));
        _mm256_storeu_ps(x + s, e);
        a = _mm256_add_ps(a, e);
    }
    _mm256_storeu_ps(acc, a);
    return s;
}

/* The whole row 16 at a time with cpu_expf16 (the last vector masked),
 * each vector's halves added to the 8 lanes in turn, a part of one only in
 * the lanes it has: the sums of exp_sum_avx2 and the C tail, in the same
 * order. Returns T. */
__attribute__((target("avx512f,avx512dq,avx512vl"))) static int exp_sum_avx512(float *x, float m, int T, float acc[8])
{
    __m512 M = _mm512_set1_ps(m);
    __m256 a = _mm256_setzero_ps();
    int s = 0;
    for (; s + 16 <= T; s += 16) {
        __m512 e = cpu_expf16(_mm512_sub_ps(_mm512_loadu_ps(x + s), M));
        _mm512_storeu_ps(x + s, e);
        a = _mm256_add_ps(a, _mm512_castps512_ps256(e));
        a = _mm256_add_ps(a, _mm512_extractf32x8_ps(e, 1));
    }
    if (s < T) {
        __mmask16 k = (__mmask16)((1u << (T - s)) - 1u);
        __m512 e = cpu_expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + s), M));
        _mm512_mask_storeu_ps(x + s, k, e);
        a = _mm256_mask_add_ps(a, (__mmask8)k, a, _mm512_castps512_ps256(e));
        a = _mm256_mask_add_ps(a, (__mmask8)(k >> 8), a, _mm512_extractf32x8_ps(e, 1));
    }
    _mm256_storeu_ps(acc, a);
    return T;
}

/* max over x[0 .. T), 16 lanes (a maximum is exact in any order; a NaN is
 * passed over, as the C's compare does) */
__attribute__((target("avx512f"))) static float row_max_avx512(const float *x, int T)
{
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int s = 0; s < T; s += 16) {
        __mmask16 k = T - s >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (T - s)) - 1u);
        m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, x + s), m);
    }
    return _mm512_reduce_max_ps(m);
}
#endif

/* Adds the mask, then softmax in place as torch's vectorized kernel: max,
 * exp(x - max), a sum in 8 lanes combined pairwise; returns 1/sum, by which
 * cpu_probs_store multiplies. */
CPU_INLINE float softmax_row_exp_code(float *x, const int32_t *mask, int T, int level)
{
    if (mask) {
#pragma omp simd
        for (int s = 0; s < T; s++) x[s] = x[s] + (mask[s] == 0 ? -FLT_MAX : 0.0f);
    }
    float m;
    int s = 0;
#ifdef CPU_HAVE_AVX2_MATH
    if (level >= CPU_ISA_AVX512) m = row_max_avx512(x, T);
    else
#endif
    {
        float mx[8];
        for (int l = 0; l < 8; l++) mx[l] = -INFINITY;
        for (; s + 8 <= T; s += 8)
            for (int l = 0; l < 8; l++) mx[l] = x[s + l] > mx[l] ? x[s + l] : mx[l];
        for (int l = 0; s + l < T; l++) mx[l] = x[s + l] > mx[l] ? x[s + l] : mx[l];
        m = mx[0];
        for (int l = 1; l < 8; l++) m = mx[l] > m ? mx[l] : m;
    }

    float acc[8] = {0};
    s = 0;
#ifdef CPU_HAVE_AVX2_MATH
    if (level >= CPU_ISA_AVX512) s = exp_sum_avx512(x, m, T, acc);
    else if (level >= CPU_ISA_AVX2) s = exp_sum_avx2(x, m, T, acc);
#else
    (void)level;
#endif
    /* the rest (all without AVX2): exp, then the sum */
    int s0 = s;
#pragma omp simd
    for (int j = s0; j < T; j++) x[j] = cpu_expf(x[j] - m);
    for (; s + 8 <= T; s += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[s + l];
    for (int l = 0; s + l < T; l++) acc[l] += x[s + l];
    float sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    return 1.0f / sum;
}
/* The avx2 variant computes the exponentials with exp_sum_avx2. */
CPU_TARGET_AVX2 static float softmax_row_exp_avx2(float *x, const int32_t *mask, int T)
{
    return softmax_row_exp_code(x, mask, T, CPU_ISA_AVX2);
}
static float softmax_row_exp_sse(float *x, const int32_t *mask, int T)
{
    return softmax_row_exp_code(x, mask, T, CPU_ISA_SSE);
}
/* The avx512 variant: the maximum in 16 lanes and the exponentials with
 * exp_sum_avx512, the sum in the same 8 lanes. */
CPU_TARGET_AVX512 static float softmax_row_exp_avx512(float *x, const int32_t *mask, int T)
{
    return softmax_row_exp_code(x, mask, T, CPU_ISA_AVX512);
}
static float softmax_row_exp(float *x, const int32_t *mask, int T)
{
    cpu_isa_level l = cpu_kernel_level(CPU_K_SOFTMAX);
    return l >= CPU_ISA_AVX512 ? softmax_row_exp_avx512(x, mask, T)
           : l >= CPU_ISA_AVX2 ? softmax_row_exp_avx2(x, mask, T)
                               : softmax_row_exp_sse(x, mask, T);
}

/* Softmax backward in place, as torch: dot = sum(dp * p) (8 lanes);
 * ds = (dp - dot) * p; then times the score scale. */
CPU_INLINE void softmax_row_backward_code(float *ds, const float *p, int T, float scaling)
{
    float acc[8] = {0};
    int s = 0;
    for (; s + 8 <= T; s += 8)
        for (int l = 0; l < 8; l++) acc[l] += ds[s + l] * p[s + l];
    for (int l = 0; s + l < T; l++) acc[l] += ds[s + l] * p[s + l];
    float dot = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
#pragma omp simd
    for (int j = 0; j < T; j++) ds[j] = ((ds[j] - dot) * p[j]) * scaling;
}
CPU_VARIANTS(CPU_K_SOFTMAX, softmax_row_backward, (float *ds, const float *p, int T, float scaling), (ds, p, T,
             scaling))

/* Rows per block of a window of len rows: a block of scores (rows x len)
 * stays in the thread's scratch-sized share of L2 between the GEMM that
 * makes it and the loops that use it; blocks are made equal so none is a
 * sliver. The caller has reserved scratch for the longest window. */
static int rows_per_block(const cpu_ctx *ctx, int len)
{
    size_t rmax = ctx->scratch_floats / (size_t)len;
    if (rmax >= (size_t)len) return len;
    size_t nblk = ((size_t)len + rmax - 1) / rmax;
    return (int)(((size_t)len + nblk - 1) / nblk);
}

/* Each window's first row, length and offset in probs, computed once per
 * call, with scratch reserved for a row of the longest window; NULL after
 * recording the failure in ctx. */
typedef struct {
    size_t row0, probs, bits; /* bits: the window's first word of keep bits */
    int len;
} att_window;

/* 64-bit words of keep bits per row of a window of len */
static size_t bit_words(int len)
{
    return ((size_t)len + 63) / 64;
}

/* *words: the keep bits of all windows */
static att_window *att_windows(cpu_ctx *ctx, const backend_windows *w, int NH, size_t *words)
{
    att_window *aw = malloc((size_t)w->B * sizeof *aw);
    if (!aw) {
        cpu_fail(ctx, "attention: out of memory");
        return NULL;
    }
    size_t at = 0, bits = 0;
    int longest = 1;
    for (int b = 0; b < w->B; b++) {
        int len = cpu_window_len(w, b);
        size_t l = (size_t)(len > 0 ? len : 0);
        aw[b].row0 = cpu_window_row0(w, b);
        aw[b].len = len;
        aw[b].probs = at;
        aw[b].bits = bits;
        at += (size_t)NH * l * l;
        bits += (size_t)NH * l * bit_words((int)l);
        if (len > longest) longest = len;
    }
    *words = bits;
    if (cpu_scratch_reserve(ctx, (size_t)longest) != 0) {
        free(aw);
        return NULL;
    }
    return aw;
}

/* Keep bits (rows, bit_words(len)) for rows r0 .. r0+rows-1 of (b,h): row
 * t's start at padded index ((b NH + h) T + r0 + t) T; with len = T a
 * multiple of 64 the rows are one run of bits too. */
static void probs_bits(uint64_t *bits, philox_stream rng, int b, int h, int NH, int T, int r0, int rows, int len,
                       float p)
{
    uint64_t first = (((uint64_t)b * (uint64_t)NH + (uint64_t)h) * (uint64_t)T + (uint64_t)r0) * (uint64_t)T;
    if (len == T && len % 64 == 0) {
        cpu_dropout_bits(bits, rng, first, (size_t)rows * (size_t)len, p);
        return;
    }
    size_t wpr = bit_words(len);
    for (int t = 0; t < rows; t++)
        cpu_dropout_bits(bits + (size_t)t * wpr, rng, first + (uint64_t)t * (uint64_t)T, (size_t)len, p);
}

/* C (M,N) = alpha op(A) op(B), as cpu_gemm with beta 0, for the blocks of
 * scores and of dP' (K = HS). OpenBLAS's beta 0 first clears C with a
 * scalar loop (sgemm_beta) that costs a fifth as much as these GEMMs
 * themselves; clearing C here with memset and passing beta 1 skips that
 * loop and runs the same kernel on the same +0s, so the results are the
 * same bits. (Where an OpenBLAS has small-matrix kernels with a beta-0
 * variant, a -0 could come out +0: softmax and its backward, which read
 * these blocks, give the same bits either way.) gemm_fixed keeps beta 0. */
static void gemm_cleared(const cpu_ctx *ctx, int transa, int transb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float *C, int ldc)
{
    if (ctx->batch_invariant) {
        cpu_gemm(ctx, transa, transb, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc);
        return;
    }
    if (ldc == N) memset(C, 0, (size_t)M * (size_t)N * sizeof *C);
    else
        for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    cpu_gemm(ctx, transa, transb, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc);
}

static void fill_nan(float *x, size_t n)
{
    if (!x) return;
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

/* One block of rows r0 .. r0+rows-1 of head h of window b, as att_run
 * hands it to a direction: off is the offset of the window's first row in
 * (N,C) arrays plus h HS, at that of the block's first row in probs, buf and
 * work the thread's two scratch blocks, mb the window's mask row or NULL. */
typedef struct {
    int b, h, len, r0, rows, NH, HS, C, T;
    size_t off, at, bits;
    float scaling, dscale, p;
    philox_stream rng;
    float *buf, *work;
    const int32_t *mb;
} att_block;

/* The pointers of one call of a direction; with dropout, the keep bits of
 * the call, which the blocks draw first when draw is 1. */
typedef struct {
    float *out, *probs, *dq, *dk, *dv, *scratch;
    const float *q, *k, *v, *dout, *cprobs;
    uint64_t *bits;
    int draw;
} att_io;

typedef void (*att_block_fn)(cpu_ctx *ctx, const att_block *a, const att_io *io);

/* Where a call's keep bits come from: a cached mask (slot, draw 0), a slot
 * claimed for the forward to fill (slot, draw 1), or memory of the call's
 * own (own, draw 1) when the cache does not hold or take the mask. */
typedef struct {
    int slot, claimed;
    uint64_t *own;
} att_mask;

/* Finds or claims the keep bits of a call with dropout; fills io->bits and
 * io->draw. 0, or -1 after recording a failure. */
static int att_mask_begin(cpu_ctx *ctx, att_mask *mk, att_io *io, const att_window *aw, const backend_windows *w,
                          int NH, float p, philox_stream rng, size_t words, int backward)
{
    cpu_mask_key key;
    cpu_mask_key_init(&key, rng, p, w, NH, 0);
    int32_t *lens = malloc((size_t)w->B * sizeof *lens);
    if (!lens) {
        cpu_fail(ctx, "attention: out of memory");
        return -1;
    }
    for (int b = 0; b < w->B; b++) lens[b] = aw[b].len;
    mk->slot = cpu_mask_find(ctx, &key, lens, words);
    mk->claimed = 0;
    mk->own = NULL;
    io->draw = mk->slot < 0;
    if (mk->slot < 0 && !backward) {
        mk->slot = cpu_mask_claim(ctx, &key, lens, words);
        mk->claimed = mk->slot >= 0;
    }
    free(lens);
    if (mk->slot >= 0) {
        io->bits = ctx->masks[mk->slot].bits;
        return 0;
    }
    io->bits = mk->own = malloc((words ? words : 1) * sizeof *mk->own);
    if (!mk->own) {
        cpu_fail(ctx, "attention: out of memory for the dropout mask");
        return -1;
    }
    return 0;
}

/* After the call: a forward's drawn mask becomes valid; a backward's is no
 * longer needed. */
static void att_mask_end(cpu_ctx *ctx, att_mask *mk, int backward)
{
    if (mk->claimed) cpu_mask_publish(ctx, mk->slot);
    else if (backward) cpu_mask_drop(ctx, mk->slot);
    free(mk->own);
}

/* Runs fn on every block of rows of every (window, head), the heads in
 * parallel with serial BLAS; on failure fills the non-NULL of nan_out (N,C)
 * with NaN instead. */
static void att_run(cpu_ctx *ctx, const backend_windows *w, int NH, int HS, float p, philox_stream rng,
                    float *const nan_out[3], att_block_fn fn, const att_io *io0, int backward)
{
    if (w->B <= 0 || w->max_len <= 0 || NH <= 0 || HS <= 0) return;
    int C = NH * HS;
    size_t words = 0;
    att_window *aw = att_windows(ctx, w, NH, &words);
    att_io call = *io0, *io = &call;
    att_mask mk = {.slot = -1};
    if (aw && p > 0.0f && att_mask_begin(ctx, &mk, io, aw, w, NH, p, rng, words, backward) != 0) {
        free(aw);
        aw = NULL;
    }
    if (!aw) {
        for (int i = 0; i < 3; i++) fill_nan(nan_out[i], (size_t)w->N * C);
        return;
    }
    float scaling = backend_score_scale(HS), dscale = cpu_dropout_scale(p);
    int nbh = w->B * NH;
    cpu_blas_serial_begin(ctx);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int bh = 0; bh < nbh; bh++) {
        att_block a = {.b = bh / NH, .h = bh % NH, .NH = NH, .HS = HS, .C = C, .T = w->T, .scaling = scaling,
                       .dscale = dscale, .p = p, .rng = rng};
        a.len = aw[a.b].len;
        if (a.len <= 0) continue;
        int R = rows_per_block(ctx, a.len);
        a.off = aw[a.b].row0 * C + (size_t)a.h * HS;
        a.mb = w->mask ? w->mask + (size_t)a.b * a.T : NULL;
        a.buf = ctx->scratch + 2 * (size_t)omp_get_thread_num() * ctx->scratch_floats;
        a.work = a.buf + ctx->scratch_floats;
        for (a.r0 = 0; a.r0 < a.len; a.r0 += R) {
            a.rows = a.len - a.r0 < R ? a.len - a.r0 : R;
            a.at = aw[a.b].probs + (size_t)a.h * a.len * a.len + (size_t)a.r0 * a.len;
            a.bits = aw[a.b].bits + ((size_t)a.h * a.len + (size_t)a.r0) * bit_words(a.len);
            fn(ctx, &a, io);
        }
    }
    cpu_blas_serial_end(ctx);
    if (p > 0.0f) att_mask_end(ctx, &mk, backward);
    free(aw);
}

/* The block's keep bits (rows, bit_words(len)), drawn first if the call
 * draws. */
static const uint64_t *block_bits(const att_block *a, const att_io *io)
{
    uint64_t *bits = io->bits + a->bits;
    if (io->draw) probs_bits(bits, a->rng, a->b, a->h, a->NH, a->T, a->r0, a->rows, a->len, a->p);
    return bits;
}

static void att_forward_block(cpu_ctx *ctx, const att_block *a, const att_io *io)
{
    int len = a->len, rows = a->rows, HS = a->HS, C = a->C;
    size_t r0c = a->off + (size_t)a->r0 * C, wpr = bit_words(len);
    float *P = io->probs ? io->probs + a->at : NULL, *S = a->work;
    // S (rows,len) = qb[r0:] (rows,HS) @ kb^T (HS,len) * scaling, in cache; batch-invariant
    // at a head size att_fixed takes: its kernels, gemm_fixed's bits without the packing
    float *kt = ctx->batch_invariant && att_fixed_ok(HS)
                    ? gemm_ws_get((size_t)HS * (size_t)((len + 15) & ~15) * sizeof(float))
                    : NULL;
    if (kt) att_fixed_scores(S, len, io->q + r0c, C, io->k + a->off, C, rows, len, HS, a->scaling, kt);
    else gemm_cleared(ctx, 0, 1, rows, len, HS, a->scaling, io->q + r0c, C, io->k + a->off, C, S, len);
    const uint64_t *bits = a->p > 0.0f ? block_bits(a, io) : NULL;
    for (int t = 0; t < rows; t++) {
        size_t o = (size_t)t * len;
        float inv = softmax_row_exp(S + o, a->mb, len);
        // P to probs, past the caches; P' = P * multipliers, or P, for the GEMM
        cpu_probs_store(P ? P + o : NULL, S + o, inv, (size_t)len, bits ? a->buf + o : NULL,
                        bits ? bits + (size_t)t * wpr : NULL, a->dscale);
    }
    cpu_probs_store_done();
    const float *Pd = bits ? a->buf : S;
    // ob[r0:] (rows,HS) = P' (rows,len) @ vb (len,HS)
    if (kt) att_fixed_pv(io->out + r0c, C, Pd, len, io->v + a->off, C, rows, len, HS);
    else cpu_gemm(ctx, 0, 0, rows, HS, len, 1.0f, Pd, len, io->v + a->off, C, 0.0f, io->out + r0c, C);
}

// out (N,C); probs (NH sum len^2, or NULL: not saved); q, k, v (N,C); w->mask (B,T) or NULL
void cpu_attention_forward(void *vctx, backend_act *vout, backend_act *vprobs, const backend_act *vq,
                           const backend_act *vk, const backend_act *vv, const backend_windows *w, int NH, int HS,
                           float p, philox_stream rng)
{
    float *out = vout;
    float *probs = vprobs;
    const float *q = vq;
    const float *k = vk;
    const float *v = vv;
    att_io io = {.out = out, .probs = probs, .q = q, .k = k, .v = v};
    float *const nan_out[3] = {out, NULL, NULL};
    att_run(vctx, w, NH, HS, p, rng, nan_out, att_forward_block, &io, 0);
}

/* Backward per block of rows, with dS in the thread's second scratch block
 * (the caller's scratch, as large as probs, would send every block of dS
 * to memory and back for nothing):
 *   dP'  = dout vb^T                     (rows,len)
 *   dv  += P'^T dout                     P' = P * mul, in thread scratch
 *   dP   = dP' * mul;  dS = (dP - sum(dP P)) P * scaling
 *   dq  += dS kb;  dk += dS^T qb
 * Masked keys need nothing: their probabilities are exactly 0, so their
 * scores pass no gradient. */
static void att_backward_block(cpu_ctx *ctx, const att_block *a, const att_io *io)
{
    int len = a->len, rows = a->rows, HS = a->HS, C = a->C;
    size_t off = a->off, r0c = off + (size_t)a->r0 * C;
    const float *P = io->cprobs + a->at, *dob = io->dout + r0c;
    float *ds = a->work, *buf = a->buf;
    // dP' (rows,len) = dob (rows,HS) @ vb^T (HS,len)
    gemm_cleared(ctx, 0, 1, rows, len, HS, 1.0f, dob, C, io->v + off, C, ds, len);
    const float *Pd = P;
    if (a->p > 0.0f) {
        // dP = dP' * multipliers and P' = P * multipliers
        const uint64_t *bits = block_bits(a, io);
        size_t wpr = bit_words(len);
        for (int t = 0; t < rows; t++) {
            size_t o = (size_t)t * len;
            cpu_dropout_apply_bits2(ds + o, buf + o, P + o, bits + (size_t)t * wpr, (size_t)len, a->dscale);
        }
        Pd = buf;
    }
    // dv (len,HS) += P'^T (len,rows) @ dob (rows,HS)
    if (io->dv) cpu_gemm(ctx, 1, 0, len, HS, rows, 1.0f, Pd, len, dob, C, 1.0f, io->dv + off, C);
    for (int t = 0; t < rows; t++) softmax_row_backward(ds + (size_t)t * len, P + (size_t)t * len, len, a->scaling);
    // dq[r0:] (rows,HS) += dS (rows,len) @ kb (len,HS);  dk (len,HS) += dS^T (len,rows) @ qb[r0:] (rows,HS)
    if (io->dq) cpu_gemm(ctx, 0, 0, rows, HS, len, 1.0f, ds, len, io->k + off, C, 1.0f, io->dq + r0c, C);
    if (io->dk) cpu_gemm(ctx, 1, 0, len, HS, rows, 1.0f, ds, len, io->q + r0c, C, 1.0f, io->dk + off, C);
}

// dq, dk, dv (N,C) +=; scratch as probs (unused here); dout, q, k, v (N,C); probs (NH sum len^2)
void cpu_attention_backward(void *vctx, backend_act *vdq, backend_act *vdk, backend_act *vdv, backend_act *vscratch,
                            const backend_act *vdout, const backend_act *vq, const backend_act *vk,
                            const backend_act *vv, const backend_act *vprobs, const backend_windows *w, int NH, int HS,
                            float p, philox_stream rng)
{
    float *dq = vdq;
    float *dk = vdk;
    float *dv = vdv;
    float *scratch = vscratch;
    const float *dout = vdout;
    const float *q = vq;
    const float *k = vk;
    const float *v = vv;
    const float *probs = vprobs;
    att_io io = {.dq = dq, .dk = dk, .dv = dv, .scratch = scratch, .q = q, .k = k, .v = v, .dout = dout,
                 .cprobs = probs};
    float *const nan_out[3] = {dq, dk, dv};
    att_run(vctx, w, NH, HS, p, rng, nan_out, att_backward_block, &io, 1);
}
