/* Fused kernels of the CUDA backend for 16-bit activations (issue 47),
 * each tested against the CPU backend's ops (tests/cudaemu/test_fused.cc).
 * CUDA C++ only. All are behind the op table (ops.def; cuda_fused.cu's
 * cuda_* entries pass ctx->atype): the LayerNorm ones are the optional
 * residual_layernorm_* and embedding_layernorm_*, each replacing a
 * sequence of ops, which bert.c calls; GELU is gelu_forward/backward; the
 * multi-tensor AdamW is the optional adamw_multi.
 *
 * Activations (x, residual, out, the saved sum, dout and activation
 * gradients) are of the type `at` names: GEMM_F32 float, GEMM_F16 __half,
 * GEMM_BF16 __nv_bfloat16, passed as void *. Everything else is fp32:
 * LayerNorm weights and their gradients, mean and rstd, embedding tables
 * and their gradients, master weights, gradients and AdamW state. Math is
 * fp32 inside every kernel, rounded to the activation type once, where a
 * value is stored.
 *
 * Conventions are backend.h's: outputs, then what backward needs saved,
 * then inputs, then weights, then sizes; forward writes (=); backward
 * accumulates (+=) into every gradient, parameter and activation alike, a
 * NULL gradient pointer meaning "not wanted". Dropout is backend.h's: keep
 * = philox_keep(rng, padded index, p) with backend_windows' padded index,
 * multiplier 1/(1-p) applied to every element (p = 0: no dropout). Letters:
 * N rows (w->N), C hidden, T window length (w->T).
 *
 * Determinism: no float atomics. Column sums (LayerNorm dw, db) are partial
 * sums per block of CUDA_FUSED_LN_ROWS rows, then a second kernel adds the
 * blocks in a fixed order; they take cuda_ws_fused_ln_backward(N, C) bytes
 * of the context's workspace (cuda_ws_get; backend/workspace_rules.h's
 * formula, which the memory planner counts). The global norm is the same
 * two stages (one launch for the per-chunk partials, one that finishes).
 * The results depend on the sizes only, not on the GPU. */
#ifndef BERTC_CUDA_FUSED_H
#define BERTC_CUDA_FUSED_H

#include "backend/cuda/cuda_internal.h"

/* Largest C the LayerNorm backward kernels take: their per-warp column
 * accumulators (4 warps x 2 x C floats) live in shared memory, 48 KiB.
 * The op table's entries decline a larger C (ops.def: the caller runs the
 * unfused ops). */
#define CUDA_FUSED_MAX_C 1536

/* Rows per block of the LayerNorm backward kernels (8 per warp): N / 32
 * blocks (128 for N = 4096), and as many partial rows of dw and db, which
 * is the workspace cuda_ws_fused_ln_backward counts. */
#define CUDA_FUSED_LN_ROWS CUDA_WS_FUSED_LN_ROWS

/* ------------------------------------------------------------------------
 * Residual add + dropout + LayerNorm (BertSelfOutput, BertOutput):
 *   sum = residual + dropout(x)      (rounded to the activation type)
 *   out = (sum - mean) * rstd * w + b
 * One warp per row. Saved for backward: sum [N,C] (activation type), mean
 * and rstd [N] (fp32; computed from the stored, rounded sum, so backward
 * sees the same xhat). out may equal residual; sum may equal x or
 * residual (each element is read before it is written, by one thread). */
void cuda_fused_residual_ln_forward(void *ctx, gemm_type at, void *out, void *sum, float *mean, float *rstd,
                                    const void *residual, const void *x, const float *w, const float *b,
                                    const backend_windows *win, int C, float eps, float p, philox_stream rng);
/* dsum = LayerNorm backward of dout; dresidual += dsum; dx += dropout
 * backward of dsum (the same mask, redrawn); dw += sum_rows dout * xhat,
 * db += sum_rows dout (fp32, deterministic). Any of dresidual, dx, dw, db
 * may be NULL. C <= CUDA_FUSED_MAX_C. Two launches (rows and partial
 * column sums; the column sums in order), the first one only without dw
 * and db. */
void cuda_fused_residual_ln_backward(void *ctx, gemm_type at, void *dresidual, void *dx, float *dw, float *db,
                                     const void *dout, const void *sum, const float *mean, const float *rstd,
                                     const float *w, const backend_windows *win, int C, float p,
                                     philox_stream rng);

/* ------------------------------------------------------------------------
 * Embeddings + LayerNorm + dropout (BertEmbeddings):
 *   e   = (wte[ids] + wtt[types]) + wpe[pos]   (fp32, as embedding_forward)
 *   out = dropout((e - mean) * rstd * w + b)   (activation type)
 * pos NULL: row n is at position n % T (padded); types NULL: type 0. The
 * tables are fp32. Saved: mean, rstd [N]; e is not saved (backward gathers
 * it again, the same bits). One warp per row. */
void cuda_fused_embed_ln_forward(void *ctx, gemm_type at, void *out, float *mean, float *rstd, const int32_t *ids,
                                 const int32_t *types, const int32_t *pos, const float *wte, const float *wpe,
                                 const float *wtt, const float *w, const float *b, const backend_windows *win, int C,
                                 float eps, float p, philox_stream rng);
/* de = LayerNorm backward of (dropout backward of dout), written (=) to
 * the scratch demb [N,C] fp32 (required: any N*C floats the caller has
 * free); dw, db += as above; then dwte, dwpe, dwtt += the rows of de as
 * cuda_embedding_backward sums them (cuda_embedding_backward_as is
 * called on the fp32 scratch, whatever `at` is: stable sort by id,
 * deterministic, no atomics; bit for bit the CPU backend's sums of the
 * same de). Any of the five gradients may be NULL. C <= CUDA_FUSED_MAX_C.
 * Launches: the rows, the column sums' second stage (with dw or db), then
 * embedding_backward's. */
void cuda_fused_embed_ln_backward(void *ctx, gemm_type at, float *dwte, float *dwpe, float *dwtt, float *dw, float *db,
                                  float *demb, const void *dout, const int32_t *ids, const int32_t *types,
                                  const int32_t *pos, const float *mean, const float *rstd, const float *wte,
                                  const float *wpe, const float *wtt, const float *w, const backend_windows *win,
                                  int C, float p, philox_stream rng);

/* ------------------------------------------------------------------------
 * AdamW over every parameter tensor in one launch (multi-tensor), with the
 * clip by the global gradient norm and the overflow check on the device.
 *
 * The table lives in device memory (built once on the host, filled by
 * cuda_mt_table_prepare, uploaded; the pointers stay valid across steps).
 * Work is cut into chunks of CUDA_MT_CHUNK elements of one tensor, one
 * block each; the chunks of tensor i are chunk0 .. chunk0 + ceil(n /
 * CUDA_MT_CHUNK) - 1. */
#define CUDA_MT_CHUNK 65536

typedef struct {
    float *p;       /* fp32 master weights [n] */
    const float *g; /* gradients [n] (times the loss scale, when there is one) */
    float *m, *v;   /* AdamW state [n] */
    void *p16;      /* the 16-bit copy of p the forward reads [n] (the launch's copy type), or NULL */
    int64_t n;
    int64_t chunk0; /* filled by cuda_mt_table_prepare */
    int decay;      /* 1: weight decay applies to this tensor */
} cuda_mt_tensor;

/* What the step found, written by cuda_mt_grad_norm (device memory; the
 * host reads it back after the step, for the log and the loss scaler). */
typedef struct {
    double sum_squares; /* of g as stored, over every tensor */
    double norm;        /* sqrt(sum_squares) * |grad_unscale|: optim_result's grad_norm */
    double clip_coef;   /* optim_clip_coef(norm, max_norm); 1 when skipped */
    float grad_scale;   /* what AdamW multiplies g by: (float)(grad_unscale * clip_coef) */
    int skipped;        /* 1: norm not finite (an inf or NaN among the gradients): nothing updated */
} cuda_mt_status;

/* Fills chunk0 of the n host-side entries; returns the total chunks. */
int64_t cuda_mt_table_prepare(cuda_mt_tensor *tab, int n);

/* Global norm in two launches (a block per chunk sums its squares in
 * double with a fixed tree into part[chunk]; one block adds the parts with
 * a fixed tree and decides): status as above, with optim_apply's formulas
 * (norm = sqrt(ss) * |grad_unscale|, clip = max_norm / (norm + 1e-6)
 * capped at 1, or 1 when max_norm <= 0). part: nchunks doubles (device).
 * The result depends on the table only, not on the GPU. */
void cuda_mt_grad_norm(void *ctx, cuda_mt_status *status, double *part, const cuda_mt_tensor *tab, int ntens,
                       int64_t nchunks, float grad_unscale, double max_norm);
/* Its two halves, for a caller that sums status->sum_squares over ranks
 * in between (the sharded optimizer, whose ranks each hold a part of the
 * gradients: an all-reduce of that one double, on the device or through
 * the host): cuda_mt_sum_squares writes status->sum_squares alone (the
 * same two launches), cuda_mt_decide the rest from it (one thread). */
void cuda_mt_sum_squares(void *ctx, cuda_mt_status *status, double *part, const cuda_mt_tensor *tab, int ntens,
                         int64_t nchunks);
void cuda_mt_decide(void *ctx, cuda_mt_status *status, float grad_unscale, double max_norm);

/* torch's AdamW on every tensor of the table, as cuda_adamw (bit for bit,
 * the same formula and roundings) with grad_scale = status->grad_scale,
 * read on the device; wd applies to tensors with decay set. Does nothing
 * when status->skipped (the caller then does not count step t). Writes
 * the updated p, rounded, to p16 where it is set: copy names its type
 * (GEMM_F16, GEMM_BF16; GEMM_F32 an fp32 copy). */
void cuda_mt_adamw(void *ctx, const cuda_mt_tensor *tab, int ntens, int64_t nchunks, const cuda_mt_status *status,
                   gemm_type copy, float lr, float b1, float b2, float eps, float wd, int64_t t);

/* ------------------------------------------------------------------------
 * GELU (exact erf) on activations of type at, fp32 inside, 16-byte loads
 * and stores where every pointer is 16-byte aligned:
 *   out = gelu(inp);  dinp += dout * gelu'(inp) */
void cuda_fused_gelu_forward(void *ctx, gemm_type at, void *out, const void *inp, size_t n);
void cuda_fused_gelu_backward(void *ctx, gemm_type at, void *dinp, const void *inp, const void *dout, size_t n);

#endif
