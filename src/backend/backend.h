/* The backend: a table of ops plus an opaque context (ggml's ggml_backend_i
 * is the model). bert.c and the optimizer call only these; the CPU backend
 * (backend/cpu) is the readable reference and the others are tested against
 * it.
 *
 * Conventions (llm.c's):
 * - Argument order: outputs, then what backward needs saved, then inputs,
 *   then weights, then sizes.
 * - Every pointer is backend memory (from backend_alloc), except where noted.
 * - Forward functions overwrite (=) their outputs.
 * - Backward functions ACCUMULATE (+=) into every gradient they write, both
 *   parameter gradients and input gradients; a gradient pointer may be NULL
 *   when it is not wanted. The caller zeroes gradient buffers.
 * - Shapes: B batch (windows), T sequence, C hidden, NH heads, HS = C/NH
 *   head size, OC output channels, N rows (B*T padded; the tokens of the
 *   windows packed, see backend_windows). Linear weights are [OC, C]
 *   (PyTorch).
 * - Ops run in order on one stream; backend_sync waits for them.
 *
 * Numerics are those of DESIGN.md: LayerNorm with biased variance and eps
 * inside the square root; exact erf GELU; attention scores scaled by
 * backend_score_scale(HS) with -FLT_MAX added at padded keys (as
 * transformers adds finfo.min); dropout inverted, the mask drawn by
 * philox_keep. */
#ifndef BERTC_BACKEND_H
#define BERTC_BACKEND_H

#include "core/philox.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The windows of a micro-batch: B windows of at most T tokens, laid out as
 * the N rows of every [N,...] tensor.
 * - Padded: cu_seqlens NULL; window b is rows b*T .. b*T + T-1 (N = B*T);
 *   mask [B,T] (1 token, 0 padding; NULL: no padding) marks the keys that
 *   attention ignores, and with the QA loss the positions it leaves out.
 * - Packed (flash-attention's varlen API): window b is rows cu_seqlens[b] ..
 *   cu_seqlens[b+1] - 1 (cu_seqlens [B+1] ascending, cu_seqlens[0] = 0, N =
 *   cu_seqlens[B]), its real tokens only; mask NULL.
 * A window's length is len_b (T padded). Element (window b, position t,
 * column c) has the index (b*T + t)*C + c it has in the padded layout
 * [B,T,C], and dropout draws its mask there, so a packed batch and the
 * padded batch of the same windows draw the same masks at every token. N
 * and max_len (the longest window; T padded) are given so that no backend
 * reads cu_seqlens back. The struct is host memory, its arrays backend
 * memory. */
typedef struct {
    const int32_t *cu_seqlens; /* [B+1] or NULL (padded) */
    const int32_t *mask;       /* [B,T] or NULL; padded only */
    int B, T, N, max_len;
} backend_windows;

/* B padded windows of T tokens with their attention mask (or NULL). */
static inline backend_windows backend_windows_padded(int B, int T, const int32_t *mask)
{
    backend_windows w = {NULL, mask, B, T, B * T, T};
    return w;
}

/* B packed windows of N tokens in all, at most max_len <= T each. */
static inline backend_windows backend_windows_packed(const int32_t *cu_seqlens, int B, int T, int N, int max_len)
{
    backend_windows w = {cu_seqlens, NULL, B, T, N, max_len};
    return w;
}

/* The attention score scale, HS^-0.5: torch computes it in double and
 * rounds it to float. Every backend takes it from here. */
static inline float backend_score_scale(int HS)
{
    return (float)(1.0 / sqrt((double)HS));
}

typedef struct {
    const char *name; /* "cpu", "cuda" */
    int probs_optional; /* 1: attention_forward takes probs NULL */

    void (*free)(void *ctx);

    /* Memory. alloc returns NULL and sets the error (ERR_RUNTIME, "out of
     * memory" in the message) on failure. upload/download copy host<->backend. */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    int (*upload)(void *ctx, void *dst, const void *host_src, size_t bytes);
    int (*download)(void *ctx, void *host_dst, const void *src, size_t bytes);
    void (*zero)(void *ctx, void *p, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    int (*sync)(void *ctx);

    /* out[N,C] = wte[ids] + wpe[pos] + wtt[types]; ids, types, pos [N]. pos
     * NULL: row n is at position n % T (a padded batch [B,T]); a packed
     * batch gives each row's position in its window. */
    void (*embedding_forward)(void *ctx, float *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                              const float *wte, const float *wpe, const float *wtt, int N, int T, int C);
    void (*embedding_backward)(void *ctx, float *dwte, float *dwpe, float *dwtt, const float *dout,
                               const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int T, int C);

    /* out[N,C] = (inp - mean) * rstd * w + b; mean, rstd [N] saved */
    void (*layernorm_forward)(void *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
                              const float *b, int N, int C, float eps);
    void (*layernorm_backward)(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,C] @ w[OC,C]^T + b[OC] (b may be NULL) */
    void (*matmul_forward)(void *ctx, float *out, const float *inp, const float *w, const float *b, int N, int C,
                           int OC);
    void (*matmul_backward)(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, int N, int C, int OC);
    /* out[i] = matmul_forward(inp, w[i], b[i]) for i < n (n <= 4; b NULL:
     * no biases), the same results; a backend may share work between them
     * (the CPU's bf16 and int8 answers prepare inp once). Optional: NULL,
     * and the caller makes n calls of matmul_forward. */
    void (*matmul_forward_n)(void *ctx, int n, float *const *out, const float *inp, const float *const *w,
                             const float *const *b, int N, int C, int OC);

    /* out = 0.5 x (1 + erf(x / sqrt 2)), elementwise over n */
    void (*gelu_forward)(void *ctx, float *out, const float *inp, size_t n);
    void (*gelu_backward)(void *ctx, float *dinp, const float *inp, const float *dout, size_t n);

    /* Self-attention of one layer, per window over its own keys. q, k, v,
     * out are [N,C] with heads laid out as C = NH*HS (as transformers'
     * view/permute gives them). probs saves softmax(q k^T * scale + mask)
     * before dropout: window b, head h is the len_b x len_b block at
     * NH * sum_{b' < b} len_b'^2 + h * len_b^2 (padded: [B,NH,T,T]), in
     * NH * sum len_b^2 floats (at most NH * N * max_len). Dropout with
     * probability p on probs: element (b, h, i, j) has the index
     * ((b*NH + h)*T + i)*T + j, its flat index in the padded [B,NH,T,T].
     * Where probs_optional is set, probs may be NULL: nothing is saved (a
     * forward-only model's answers). */
    void (*attention_forward)(void *ctx, float *out, float *probs, const float *q, const float *k, const float *v,
                              const backend_windows *w, int NH, int HS, float p, philox_stream rng);
    /* scratch: as large as probs, working memory. */
    void (*attention_backward)(void *ctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                               const float *q, const float *k, const float *v, const float *probs,
                               const backend_windows *w, int NH, int HS, float p, philox_stream rng);

    /* out = inp * keep / (1 - p) over [w->N, C], keep = philox_keep(rng,
     * index, p) with backend_windows' padded index (a padded batch's flat
     * index); out may equal inp. p = 0 copies. As torch, the mask multiplies
     * every element: a dropped inf or NaN gives NaN. */
    void (*dropout_forward)(void *ctx, float *out, const float *inp, const backend_windows *w, int C, float p,
                            philox_stream rng);
    void (*dropout_backward)(void *ctx, float *dinp, const float *dout, const backend_windows *w, int C, float p,
                             philox_stream rng);

    /* out = a + b (out may alias a or b) */
    void (*add)(void *ctx, float *out, const float *a, const float *b, size_t n);

    /* The QA loss of transformers' BertForQuestionAnswering. logits [N,2]
     * (start, end interleaved, as qa_outputs gives them); start, end [B]
     * label positions in their windows, clamped to [0, T] with T ignored.
     * Window b's softmax runs over its first len_b positions: packed, its
     * tokens; padded with a mask, the ones of its mask row (ones then
     * zeros); padded without, all T (transformers' loss, which sees the
     * padding). A label in [len_b, T) points at padding and gives an
     * infinite loss (callers reject it). Writes the loss (start CE + end
     * CE) / 2 (each a mean over its non-ignored rows) to loss[0] and
     * dlogits = grad_scale * d loss / d logits, overwritten on all N rows
     * (0 outside the windows' lengths). When every row of one side is
     * ignored, that side's mean is torch's 0/0: the loss is NaN, and that
     * side's gradient is 0. */
    void (*qa_loss)(void *ctx, float *loss, float *dlogits, const float *logits, const int32_t *start,
                    const int32_t *end, const backend_windows *w, float grad_scale);

    /* Optimizer helpers. sum_squares is deterministic (fixed reduction
     * order for a given thread count) and returns the result to the host. */
    double (*sum_squares)(void *ctx, const float *x, size_t n);
    void (*scale)(void *ctx, float *x, size_t n, float s);
    /* 1 when every element is finite. */
    int (*all_finite)(void *ctx, const float *x, size_t n);
    /* torch.optim.AdamW on n elements: g is multiplied by grad_scale first;
     * t is the 1-based step; wd = 0 for tensors without decay. lr, b1, b2
     * and wd are read as the shortest decimals that round to these floats
     * (0.999f is 0.999), because torch computes 1 - b2, b2^t and lr * wd
     * from Python doubles; so the CPU op is bit-for-bit torch's single-tensor
     * AdamW (tests/backend/test_ops_torch.c). */
    void (*adamw)(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, int64_t t, float grad_scale);

    /* Optional (NULL: none): [p, p + bytes) of backend memory is one tensor,
     * `name`, for a memory checker (the CUDA backend on its CPU stand-in
     * then stops a kernel that reaches past it into a neighbour carved out
     * of the same allocation). No effect on results. */
    void (*annotate)(void *ctx, const void *p, size_t bytes, const char *name);
} backend_i;

typedef struct backend {
    const backend_i *i;
    void *ctx;
} backend;

/* "cpu" or "cuda"; nthreads applies to the CPU backend (0 = all cores). */
int backend_cpu_create(backend *out, int nthreads);
/* Batch invariance: on (1) every row of every product is computed in one
 * fixed order (backend/cpu/gemm_fixed.h), so a window's outputs are the same
 * bits whatever other windows share its batch, whatever the batch size and
 * thread count; off (0, the default) the fastest GEMM. Returns 1 when the
 * backend honours it (the CPU), 0 when it does not (CUDA: cuBLASLt picks
 * its algorithm by shape). */
int backend_set_batch_invariant(backend *b, int on);
/* --precision bf16 on the CPU (on 1; off 0): the linear layers' products
 * take bf16 operands, rounded to nearest even from the fp32 arrays, with
 * fp32 accumulation and fp32 outputs (oneDNN's bf16 GEMM), as the CUDA
 * backend's bf16; attention, the other ops, weights, gradients and AdamW
 * stay fp32. Needs AVX512-BF16 (or AMX-BF16), the avx512 level and oneDNN:
 * otherwise ERR_INPUT with the reason. impl (may be NULL) gets "oneDNN 2.6.3
 * gemm:jit". A batch-invariant backend keeps computing in fp32. */
int backend_cpu_set_bf16(backend *b, int on, char *impl, size_t cap);
/* The CUDA backend in its precision auto, through the module
 * (backend/cuda_module.h; defined in backend/select.c): ERR_RUNTIME when the
 * module or a usable GPU is missing. */
int backend_cuda_create(backend *out, int device, int64_t mem_limit);
void backend_free(backend *b);

/* The GEMM precision a backend runs (select.c parses and chooses it; the
 * CUDA module's table carries it, so it lives with the contract). */
typedef enum {
    PREC_AUTO = 0,
    PREC_FP32, /* fp32 GEMMs (no Tensor Cores) */
    PREC_TF32, /* fp32 storage, TF32 Tensor Core GEMMs */
    PREC_FP16, /* fp16 GEMM inputs, fp32 accumulation; needs loss scaling */
    PREC_BF16, /* bf16 GEMM inputs, fp32 accumulation */
    PREC_INT8, /* answers on the CPU only: int8 products, int32 sums (backend_cpu_set_answer_precision) */
} precision_kind;
/* Answers (predict, ask, serve, run_squad, the trainer's evaluation) in p on
 * the CPU backend b: PREC_BF16 or PREC_INT8 from now on run every
 * matmul_forward with 16 or more outputs (the encoder's linear layers; the
 * QA head's 2 stay fp32) through backend/cpu/gemm_lowp.h: the weights
 * prepared once, on the layer's first forward (int8: symmetric per output
 * channel; bf16: rounded to nearest even) and kept until the backend
 * writes over them (upload, copy, zero, release, adamw), each row of the
 * input quantised per row (int8) or rounded (bf16) in every call, int32 or
 * fp32 sums, fp32 out. Batch-invariant: a row's output depends on that row
 * and the weights only. Everything else stays fp32; backward is not
 * affected (training does not use it). PREC_FP32 (or AUTO) goes back to
 * fp32 and drops the prepared weights; on a CUDA backend it does nothing.
 * ERR_INPUT with the reason when this CPU cannot run p at speed (no
 * AVX512-VNNI / AVX512-BF16, or BERTC_CPU_ISA below avx512: "--precision
 * int8: this CPU (...) lacks AVX512-VNNI ..."), for another precision, or
 * for a backend that is not the CPU's. kernel (may be NULL) gets the
 * kernel that runs ("avx512vnni", "avx512bf16"). */
int backend_cpu_set_answer_precision(backend *b, precision_kind p, char *kernel, size_t cap);
/* The check alone, without a backend (bertc version, option parsing). */
int backend_cpu_answer_check(precision_kind p, char *kernel, size_t cap);
/* --precision auto for a GPU of this compute capability: bf16 from 8.0,
 * fp16 below (7.5 is the oldest the CUDA backend is built for). Defined in
 * backend/select.c; the CUDA module gets it through its host table. */
precision_kind select_auto_precision(int cc_major, int cc_minor);

/* Memory of a backend, for --micro-batch auto and the memory checks:
 * free = what bertc may still allocate (the device's free memory, capped by
 * mem_limit minus what bertc holds), used = what bertc's allocations hold
 * now, peak = the high-water mark of used since creation or the last reset.
 * Returns 0 on the CUDA backend; ERR_INPUT on others (nothing to measure:
 * the CPU backend's memory is the host's). */
typedef struct {
    int64_t free, used, peak, limit, device_total, device_free;
} backend_mem;

#endif
