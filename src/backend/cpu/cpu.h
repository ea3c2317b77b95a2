/* The CPU backend, inside: the context and the ops, one function per op of
 * backend.h, split over these files:
 *   cpu_ctx.c       the context's helpers: thread count, the GEMM wrapper, scratch, failures
 *   cpu_backend.c   memory, the op table, the door (get_proc), creation
 *   answer_lowp.c   answers in bf16 and int8
 *   ops_dense.c     embedding, layernorm, matmul, gelu, dropout, add
 *   ops_attention.c self-attention forward and backward
 *   ops_loss.c      QA loss and the optimizer helpers (sum_squares, adamw, ...)
 *   dropout_mask.c  the dropout multipliers (and keep bits) from the Philox stream
 *   mask_cache.c    attention dropout masks kept from forward to backward
 *
 * Padded and packed batches (backend_windows) run through the same ops: a
 * padded batch is a packed one whose windows all have length T, plus the
 * attention mask.
 *
 * Letters: B batch (windows), T sequence, C channels, NH heads, HS = C/NH,
 * OC output channels, N rows. Forward functions overwrite (=) their outputs;
 * backward functions accumulate (+=) into every gradient, inputs' and
 * parameters' alike, and skip a NULL one.
 *
 * Determinism: work is cut into units fixed by the sizes (and, for column
 * splits, the thread count); every output element belongs to one unit, which
 * computes it in a fixed order whichever thread runs it, and no reduction
 * uses atomics or an OpenMP reduction clause (whose combining order is
 * unspecified). So the same inputs and thread count give the same bytes.
 * Units are handed out dynamically: on a busy machine a thread that loses
 * its core does not hold the others at the barrier for its whole share. */
#ifndef BERTC_BACKEND_CPU_H
#define BERTC_BACKEND_CPU_H

#include "backend/backend.h"
#include "backend/cpu/onednn_dl.h"

#include <stddef.h>
#include <stdint.h>

/* What determines a kept dropout mask besides the window lengths: the
 * stream, p (its bits) and the layout: attention's (NH heads, C 0) or a
 * hidden dropout's (rows of C, NH 0). Built from memset zeros and copied
 * with memcpy, so that memcmp compares padding too. */
typedef struct {
    uint64_t seed;
    uint32_t step, stream, p_bits;
    int NH, T, B, C;
} cpu_mask_key;

/* One cached mask (mask_cache.c). */
typedef struct {
    cpu_mask_key key;
    int32_t *lens; /* key, continued: the B window lengths */
    uint64_t *bits;
    size_t words, cap; /* words of the mask, words allocated */
    uint64_t age;      /* when claimed; the oldest goes first */
    int state;         /* CPU_MASK_EMPTY, _FILLING or _VALID */
} cpu_mask_slot;

#define CPU_MASK_SLOTS 64

typedef struct {
    int nthreads;
    /* Per-thread working memory for attention row blocks: thread t has the
     * two blocks of scratch_floats each at scratch + 2 t scratch_floats,
     * 64-byte aligned. Grown (outside parallel regions) when a sequence is
     * longer than a block holds. */
    float *scratch;
    size_t scratch_floats;
    /* 1 when the OpenBLAS we run with has its own pthreads pool (not the
     * OpenMP build, which goes single-threaded inside a parallel region by
     * itself): then parallel regions that call BLAS must make it serial. */
    int blas_pthreads;
    /* 1 between cpu_blas_serial_begin and _end: cpu_gemm is called by the
     * threads of a parallel region, each on its own problem, and must run
     * on the calling thread alone. Read only inside the region. */
    int blas_serial;
    /* 1: cpu_gemm computes with gemm_fixed, whose every row is one fixed
     * order of operations, so a window's results do not depend on the other
     * windows of its batch (inference: predict, serve, evaluation). */
    int batch_invariant;
    /* oneDNN's sgemm when it is the training GEMM (cpu_kernels_gemm_choose), else NULL: OpenBLAS. */
    onednn_sgemm_fn onednn_sgemm;
    /* 1: the linear layers' products take bf16 operands (rounded from the
     * fp32 arrays into bf16_buf) with fp32 accumulation and outputs, through
     * oneDNN (--precision bf16; backend_cpu_set_bf16). batch_invariant wins. */
    int bf16;
    uint16_t *bf16_buf;
    size_t bf16_cap; /* elements */
    /* Answers in bf16 or int8 (backend_set_answer_precision): 0, or
     * PREC_BF16 / PREC_INT8; then cpu_matmul_forward runs the layers with
     * OC >= CPU_LOWP_MIN_OC on their prepared weights (answer_lowp.c). */
    int lowp;
    struct cpu_lowp_entry *lowp_cache;
    int lowp_n, lowp_cap;
    /* Attention dropout masks drawn by forwards, for their backwards. */
    cpu_mask_slot masks[CPU_MASK_SLOTS];
    size_t mask_words; /* allocated in masks[], all slots */
    uint64_t mask_clock;
    /* Sticky failure of an op (ops return void); backend sync reports it. */
    int error;
    char error_msg[200];
} cpu_ctx;

/* answer_lowp.c. Layers with fewer outputs (the QA head's 2) stay fp32. */
#define CPU_LOWP_MIN_OC 16
/* 1 when ctx answers in bf16 or int8 and computed out = inp w^T + b so (the
 * weights prepared on first use), 0 when the caller computes it in fp32. */
int cpu_lowp_matmul(cpu_ctx *ctx, float *out, const float *inp, const float *w, const float *b, int N, int C, int OC);
/* The same for n (<= GEMM_LOWP_MAX_N) layers on one input (b NULL, or n
 * biases each possibly NULL): the input's rows prepared once. */
int cpu_lowp_matmul_n(cpu_ctx *ctx, int n, float *const *out, const float *inp, const float *const *w,
                      const float *const *b, int N, int C, int OC);
/* Drops the prepared weights that overlap [p, p + bytes) (the backend
 * writes there), or lie in the block p (its whole allocation), or all. */
void cpu_lowp_forget(cpu_ctx *ctx, const void *p, size_t bytes);
void cpu_lowp_forget_block(cpu_ctx *ctx, const void *p);
void cpu_lowp_free(cpu_ctx *ctx);

/* Makes omp and OpenBLAS use ctx->nthreads on the calling thread (the
 * OpenMP build of OpenBLAS follows omp_get_max_threads of its caller). */
void cpu_set_threads(cpu_ctx *ctx);
/* Ensures each thread has two blocks of `floats` of scratch; 0, or -1 after recording the
 * failure in ctx->error. Called outside parallel regions only. */
int cpu_scratch_reserve(cpu_ctx *ctx, size_t floats);
/* ctx->bf16_buf with room for elems bf16 values (grown, contents lost), or
 * NULL after recording the failure. Called outside parallel regions only. */
uint16_t *cpu_bf16_reserve(cpu_ctx *ctx, size_t elems);
/* Records a failure for backend sync to report. */
void cpu_fail(cpu_ctx *ctx, const char *what);
/* Around a parallel region whose threads each call cpu_gemm: a pthreads
 * OpenBLAS would otherwise start nthreads more threads per call. */
void cpu_blas_serial_begin(cpu_ctx *ctx);
void cpu_blas_serial_end(cpu_ctx *ctx);

/* C (M,N) = alpha op(A) op(B) + beta C, row-major, op(X) = X^T when trans:
 * every GEMM of the CPU ops goes through here (oneDNN's or OpenBLAS's sgemm,
 * or gemm_fixed when ctx->batch_invariant). Outside
 * a cpu_blas_serial_begin/end region it may use ctx->nthreads threads (the
 * caller has run cpu_set_threads); inside one, the calling thread only. */
void cpu_gemm(const cpu_ctx *ctx, int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* Window b of w: its first row and its length (all T in a padded batch;
 * the mask is attention's business). cu_seqlens is host memory here. */
static inline size_t cpu_window_row0(const backend_windows *w, int b)
{
    return w->cu_seqlens ? (size_t)w->cu_seqlens[b] : (size_t)b * (size_t)w->T;
}

static inline int cpu_window_len(const backend_windows *w, int b)
{
    return w->cu_seqlens ? w->cu_seqlens[b + 1] - w->cu_seqlens[b] : w->T;
}

/* Elementwise loops run in parallel only from this many elements on. Below
 * it a loop takes under ~100 us, and a parallel region is a barrier: cheap
 * on an idle machine, but on a busy one it waits until the other thread
 * gets a core, which can cost milliseconds. */
#define CPU_PAR_MIN (1 << 18)

/* The ops (ops_dense.c, ops_attention.c, ops_loss.c): cpu_NAME for every
 * line of backend/ops.def, and the optional ones this backend has. */
#define BACKEND_OP(name, ret, params) ret cpu_##name params;
#define BACKEND_OPT(name, cpu, cuda, ret, params) BACKEND_IF_##cpu(ret cpu_##name params;)
#include "backend/ops.def"

/* The door's functions (backend_i.get_proc; BACKEND_PROC_* in backend.h). */
void *cpu_get_proc(const char *name);
/* answer_lowp.c: BACKEND_PROC_ANSWER_PRECISION and _ANSWER_CHECK. */
int cpu_set_answer_precision(void *ctx, precision_kind p, char *kernel, size_t cap);
int cpu_answer_check(precision_kind p, char *kernel, size_t cap);

/* Dropout multipliers: mul[j] = keep(first + j) ? scale : 0 for j < count,
 * with one Philox block per 4 elements (philox_uniform draws a whole block
 * for each element). Shared by dropout and attention. */
void cpu_dropout_mask(float *mul, philox_stream rng, uint64_t first, size_t count, float p, float scale);
/* The multiplier for kept elements: 1 / (1 - p), as torch divides the
 * Bernoulli mask by (1 - p); 0 when p >= 1 (torch returns zeros). */
float cpu_dropout_scale(float p);
/* The same masks as keep bits: bit j % 64 of bits[j / 64] is keep(first +
 * j) for j < count; bits past count in the last word are 0. */
void cpu_dropout_bits(uint64_t *bits, philox_stream rng, uint64_t first, size_t count, float p);
/* out[i] = x[i] * m[i], m[i] = bit i of bits ? scale : 0, for i < n: the
 * products of a multiplier mask of cpu_dropout_mask, bit for bit. */
void cpu_dropout_apply_bits(float *out, const float *x, const uint64_t *bits, size_t n, float scale);
/* The same m: dx[i] = m[i] * dx[i] and out[i] = x[i] * m[i]. */
void cpu_dropout_apply_bits2(float *dx, float *out, const float *x, const uint64_t *bits, size_t n, float scale);
/* The same m: out[i] += x[i] * m[i]. */
void cpu_dropout_apply_bits_acc(float *out, const float *x, const uint64_t *bits, size_t n, float scale);

/* The last pass of a softmax row, for attention: y = x[i] * inv goes to
 * probs[i] with streaming stores (probs is read again only by the
 * backward, long after it has left the caches), and to out[i] = y * m[i]
 * (m as cpu_dropout_apply_bits) when out is not NULL, else back to x[i].
 * probs NULL (a forward-only model saves nothing): y to out or x only. */
void cpu_probs_store(float *probs, float *x, float inv, size_t n, float *out, const uint64_t *bits, float scale);
/* Orders the streaming stores of this thread before what follows. */
void cpu_probs_store_done(void);

/* mask_cache.c: the dropout masks of recent forwards (attention's, and
 * hidden dropout's), as keep bits in their op's layout, at most
 * CPU_MASK_BUDGET bytes. A mask is a pure
 * function of its key and lengths, so a lookup that misses only costs the
 * draw. */
enum { CPU_MASK_EMPTY, CPU_MASK_FILLING, CPU_MASK_VALID };
#define CPU_MASK_BUDGET ((size_t)256 << 20)

/* The key of the mask drawn from rng with probability p over w's padded
 * layout: NH heads (attention, C 0) or rows of C (hidden dropout, NH 0). */
void cpu_mask_key_init(cpu_mask_key *key, philox_stream rng, float p, const backend_windows *w, int NH, int C);
/* The slot holding the valid mask of (key, lens) in `words` words, or -1. */
int cpu_mask_find(cpu_ctx *ctx, const cpu_mask_key *key, const int32_t *lens, size_t words);
/* A slot, in state FILLING, with room for `words` words, for the mask of
 * (key, lens); -1 when it does not fit (or on out of memory: no caching). */
int cpu_mask_claim(cpu_ctx *ctx, const cpu_mask_key *key, const int32_t *lens, size_t words);
/* A filled slot's mask becomes valid. */
void cpu_mask_publish(cpu_ctx *ctx, int slot);
/* Forgets a slot's mask; its memory is kept for the next claim. */
void cpu_mask_drop(cpu_ctx *ctx, int slot);
void cpu_mask_cache_free(cpu_ctx *ctx);

#endif
