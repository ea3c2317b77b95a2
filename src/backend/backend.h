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
 * - Shapes: B batch, T sequence, C hidden, NH heads, HS = C/NH head size,
 *   OC output channels, N = B*T rows. Linear weights are [OC, C] (PyTorch).
 * - Ops run in order on one stream; backend_sync waits for them.
 *
 * Numerics are those of DESIGN.md: LayerNorm with biased variance and eps
 * inside the square root; exact erf GELU; attention scores scaled by
 * 1/sqrt(HS) with -FLT_MAX added at padded keys (as transformers adds
 * finfo.min); dropout inverted, the mask drawn by philox_keep. */
#ifndef BERTC_BACKEND_H
#define BERTC_BACKEND_H

#include "core/philox.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name; /* "cpu", "cuda" */

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

    /* out[B,T,C] = wte[ids] + wpe[t] + wtt[types]; ids, types [B,T] */
    void (*embedding_forward)(void *ctx, float *out, const int32_t *ids, const int32_t *types, const float *wte,
                              const float *wpe, const float *wtt, int B, int T, int C);
    void (*embedding_backward)(void *ctx, float *dwte, float *dwpe, float *dwtt, const float *dout,
                               const int32_t *ids, const int32_t *types, int B, int T, int C);

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

    /* out = 0.5 x (1 + erf(x / sqrt 2)), elementwise over n */
    void (*gelu_forward)(void *ctx, float *out, const float *inp, size_t n);
    void (*gelu_backward)(void *ctx, float *dinp, const float *inp, const float *dout, size_t n);

    /* Self-attention of one layer. q, k, v, out are [B,T,C] with heads laid
     * out as C = NH*HS (as transformers' view/permute gives them). probs
     * [B,NH,T,T] saves softmax(q k^T / sqrt(HS) + mask) before dropout;
     * mask [B,T] is the attention mask (1 token, 0 padding). Dropout with
     * probability p on probs uses rng (element index = flat index in probs). */
    void (*attention_forward)(void *ctx, float *out, float *probs, const float *q, const float *k, const float *v,
                              const int32_t *mask, int B, int T, int NH, int HS, float p, philox_stream rng);
    /* scratch: [B,NH,T,T] floats of working memory. */
    void (*attention_backward)(void *ctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                               const float *q, const float *k, const float *v, const float *probs,
                               const int32_t *mask, int B, int T, int NH, int HS, float p, philox_stream rng);

    /* out = inp * keep / (1 - p), keep = philox_keep(rng, i, p); out may equal inp. p = 0 copies.
     * As torch, the mask multiplies every element: a dropped inf or NaN gives NaN. */
    void (*dropout_forward)(void *ctx, float *out, const float *inp, size_t n, float p, philox_stream rng);
    void (*dropout_backward)(void *ctx, float *dinp, const float *dout, size_t n, float p, philox_stream rng);

    /* out = a + b (out may alias a or b) */
    void (*add)(void *ctx, float *out, const float *a, const float *b, size_t n);

    /* The QA loss of transformers' BertForQuestionAnswering. logits [B,T,2]
     * (start, end interleaved, as qa_outputs gives them); start, end [B]
     * label positions, clamped to [0, T] with T ignored. Writes the loss
     * (start CE + end CE) / 2 (each a mean over its non-ignored rows) to
     * loss[0] and dlogits = grad_scale * d loss / d logits (overwritten).
     * When every row of one side is ignored, that side's mean is torch's
     * 0/0: the loss is NaN, and that side's gradient is 0. */
    void (*qa_loss)(void *ctx, float *loss, float *dlogits, const float *logits, const int32_t *start,
                    const int32_t *end, int B, int T, float grad_scale);

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
     * AdamW (tests/test_ops_torch.c). */
    void (*adamw)(void *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, int64_t t, float grad_scale);

    /* Packed (variable-length) micro-batches, as flash-attention's varlen
     * API: B windows with their real tokens only, concatenated; window b is
     * rows cu_seqlens[b] .. cu_seqlens[b+1] - 1 of N = cu_seqlens[B] rows
     * (cu_seqlens [B+1], backend memory, ascending, cu_seqlens[0] = 0).
     * Row-wise ops (layernorm, matmul, gelu, add) run on the N rows as they
     * are. Tp is the padded length the packed batch stands for (every window
     * no longer than Tp): dropout draws the element index the same element
     * has in the padded layout [B,Tp,...], so a packed run and a padded run
     * of the same windows draw the same masks at every real position. */

    /* out[N,C] = wte[ids] + wpe[pos] + wtt[types]; ids, types, pos [N] (pos:
     * each row's position in its window) */
    void (*embedding_pos_forward)(void *ctx, float *out, const int32_t *ids, const int32_t *types, const int32_t *pos,
                                  const float *wte, const float *wpe, const float *wtt, int N, int C);
    void (*embedding_pos_backward)(void *ctx, float *dwte, float *dwpe, float *dwtt, const float *dout,
                                   const int32_t *ids, const int32_t *types, const int32_t *pos, int N, int C);

    /* Dropout of [N,C] packed rows (N = cu_seqlens[B], given so that no
     * backend reads it back): element (window b, position t, column c)
     * keeps with philox_keep(rng, (b * Tp + t) * C + c, p). */
    void (*dropout_varlen_forward)(void *ctx, float *out, const float *inp, const int32_t *cu_seqlens, int B, int N,
                                   int Tp, int C, float p, philox_stream rng);
    void (*dropout_varlen_backward)(void *ctx, float *dinp, const float *dout, const int32_t *cu_seqlens, int B,
                                    int N, int Tp, int C, float p, philox_stream rng);

    /* Self-attention per window over its own length, no mask: q, k, v, out
     * [N,C]. probs is packed: window b, head h is the len x len block
     * (len = its length) at NH * sum_{b' < b} len_b'^2 + h * len * len,
     * in all NH * sum len^2 floats (at most NH * N * max_len). Dropout on
     * probs: element (b, h, i, j) has index ((b * NH + h) * Tp + i) * Tp + j,
     * as attention_forward's flat index into [B,NH,Tp,Tp]. max_len is the
     * longest window (<= Tp); scratch is as large as probs. */
    void (*attention_varlen_forward)(void *ctx, float *out, float *probs, const float *q, const float *k,
                                     const float *v, const int32_t *cu_seqlens, int B, int max_len, int NH, int HS,
                                     int Tp, float p, philox_stream rng);
    void (*attention_varlen_backward)(void *ctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                      const float *q, const float *k, const float *v, const float *probs,
                                      const int32_t *cu_seqlens, int B, int max_len, int NH, int HS, int Tp, float p,
                                      philox_stream rng);

    /* The QA loss with each window's softmax over its real positions only
     * (qa_loss with the padding positions masked out). logits, dlogits
     * [N,2]; window b is rows row0[b] .. row0[b] + len[b] - 1 (row0, len
     * [B], backend memory; packed: row0 = cu_seqlens, padded: row0[b] =
     * b * Tp). Labels are window positions clamped to [0, Tp], Tp ignored,
     * as qa_loss; a label in [len[b], Tp) points at padding and gives an
     * infinite loss (callers reject it). dlogits is overwritten on all N
     * rows (0 outside the windows). */
    void (*qa_loss_varlen)(void *ctx, float *loss, float *dlogits, const float *logits, const int32_t *row0,
                           const int32_t *len, const int32_t *start, const int32_t *end, int B, int N, int Tp,
                           float grad_scale);
} backend_i;

typedef struct backend {
    const backend_i *i;
    void *ctx;
} backend;

/* "cpu" or "cuda"; nthreads applies to the CPU backend (0 = all cores). */
int backend_cpu_create(backend *out, int nthreads);
/* The CUDA backend in its precision auto, through the module
 * (backend/cuda_module.h; defined in backend/select.c): ERR_RUNTIME when the
 * module or a usable GPU is missing. */
int backend_cuda_create(backend *out, int device, int64_t mem_limit);
void backend_free(backend *b);

#endif
