/* The backend: a table of ops plus an opaque context (ggml's ggml_backend_i
 * is the model). bert.c and the optimizer call only these; the CPU backend
 * (backend/cpu) is the readable reference and the others are tested against
 * it. Each op is declared once, with its contract, in backend/ops.def;
 * this table's fields, each backend's prototypes and tables are made from
 * that list.
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

/* Floats attention_forward saves in probs for `rows` rows of windows at
 * most T long (ops.def): the probabilities, NH rows T (packed: NH sum
 * len^2 fits), or, where the backend's attention saves the log-sum-exp
 * (lse 1: backend_attention_saves_lse), lse [NH,rows] fp32 then, from the
 * next multiple of 64 floats, its output [rows, NH*HS] in 16 bits. */
static inline size_t backend_attention_lse_part(size_t rows, int NH)
{
    return (rows * (size_t)NH + 63) & ~(size_t)63;
}

static inline size_t backend_attention_saved_floats(int lse, size_t rows, int T, int NH, int HS)
{
    if (!lse) return rows * (size_t)NH * (size_t)T;
    return backend_attention_lse_part(rows, NH) + (rows * (size_t)NH * (size_t)HS + 1) / 2;
}

/* Floats of attention_backward's scratch: as probs, or none (NULL) where
 * the attention saves the log-sum-exp. */
static inline size_t backend_attention_scratch_floats(int lse, size_t rows, int T, int NH)
{
    return lse ? 0 : rows * (size_t)NH * (size_t)T;
}

/* Activation memory: the ops' activations (ops.def) are backend memory of
 * the element type the backend declares (backend_act_type), not float. */
typedef void backend_act;
typedef enum { BACKEND_F32 = 0, BACKEND_F16, BACKEND_BF16 } backend_dtype;

/* adamw_multi (ops.def): the parameters [off, off + len) of the block, one
 * tensor or a piece of one, whose AdamW state is at m + state, v + state. */
typedef struct {
    size_t off, len, state;
    int decay; /* 1: weight decay applies */
} backend_adamw_range;

/* adamw_multi's step: AdamW's hyperparameters (adamw's), the step t it
 * counts when it updates, and how it finds the clip. sum_given: clip and
 * overflow check from sum_squares (a sum over ranks, say); else from the
 * gradients' own sum of squares, taken on the device. */
typedef struct {
    float lr, b1, b2, eps, wd;
    int64_t t;
    float grad_unscale;
    double max_norm;
    int sum_given;
    double sum_squares;
} backend_adamw_args;

/* What adamw_multi decided (optim_apply's formulas): the sum of squares
 * used, norm = sqrt(sum) * |grad_unscale|, the clip coefficient (1 when
 * skipped), and skipped (the norm not finite: nothing updated). */
typedef struct {
    double sum_squares, norm, clip_coef;
    int skipped;
} backend_adamw_result;

/* For ops.def's includers, on an optional op's cpu / cuda flag:
 * BACKEND_IF_1(...) is its arguments, BACKEND_IF_0(...) nothing (a
 * prototype); BACKEND_FN_1(fn) is fn, BACKEND_FN_0(fn) NULL (a table entry). */
#define BACKEND_IF_0(...)
#define BACKEND_IF_1(...) __VA_ARGS__
#define BACKEND_FN_0(fn) NULL
#define BACKEND_FN_1(fn) fn
/* A table's memory entries from its functions PREFIXfree, PREFIXalloc, ... */
#define BACKEND_MEMORY_FNS(prefix)                                                                             \
    .free = prefix##free, .alloc = prefix##alloc, .release = prefix##release, .upload = prefix##upload,      \
    .download = prefix##download, .zero = prefix##zero, .copy = prefix##copy, .sync = prefix##sync

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

    /* The element type of activation memory (backend_act) in this context:
     * BACKEND_F32 on the CPU and on CUDA in fp32/tf32; CUDA in fp16/bf16
     * keeps them in that type (BACKEND_F16 / BACKEND_BF16). */
    backend_dtype (*act_type)(void *ctx);
    /* The one door to what only some backends have (ggml's
     * get_proc_address): the function called name (BACKEND_PROC_*, below),
     * or NULL. Each takes the context first where it needs one. */
    void *(*get_proc)(const char *name);

    /* The ops, one field per line of ops.def (contracts there). */
#define BACKEND_OP(name, ret, params) ret(*name) params;
#define BACKEND_OPT(name, cpu, cuda, ret, params) ret(*name) params;
#include "backend/ops.def"

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
    PREC_INT8, /* answers on the CPU only: int8 products, int32 sums (backend_set_answer_precision) */
} precision_kind;
/* The element type of b's activations and its size in bytes: what the
 * model allocates an activation of n elements with. */
static inline backend_dtype backend_act_type(const backend *b)
{
    return b->i->act_type ? b->i->act_type(b->ctx) : BACKEND_F32;
}

static inline size_t backend_act_size(const backend *b)
{
    return backend_act_type(b) == BACKEND_F32 ? 4 : 2;
}

/* Host floats and activations of type t (act_convert.c): n values each
 * way, a 16-bit type rounded to nearest even as CUDA's __float2half_rn /
 * __float2bfloat16_rn (subnormals kept, NaN the canonical 0x7fff) and
 * widened exactly; BACKEND_F32 copies. backend_act_round rounds x in place
 * to the values type t holds (a CPU reference fed what the device sees). */
void backend_act_from_float(backend_dtype t, void *dst, const float *src, size_t n);
void backend_act_to_float(backend_dtype t, float *dst, const void *src, size_t n);
void backend_act_round(backend_dtype t, float *x, size_t n);
/* upload / download of n activations of b's type from / to host floats,
 * converted on the host; fp32 is a plain upload / download. */
int backend_act_upload(const backend *b, backend_act *dst, const float *src, size_t n);
int backend_act_download(const backend *b, float *dst, const backend_act *src, size_t n);

/* The door (backend_i.get_proc). The layers above call the typed wrappers
 * below (backend.c), never a backend's own functions by name; a backend
 * without the function behaves as each wrapper says. */
#define BACKEND_PROC_BATCH_INVARIANT "set_batch_invariant" /* int (void *ctx, int on) */
#define BACKEND_PROC_BF16 "set_bf16" /* int (void *ctx, int on, char *impl, size_t cap) */
#define BACKEND_PROC_ANSWER_PRECISION "set_answer_precision" /* int (void *ctx, precision_kind, char *, size_t) */
#define BACKEND_PROC_ANSWER_CHECK "answer_check"             /* int (precision_kind, char *kernel, size_t cap) */
#define BACKEND_PROC_KERNEL_INFO "kernel_info"               /* char *(const char *what, char *buf, size_t cap) */
#define BACKEND_PROC_ATTENTION_SAVES_LSE "attention_saves_lse" /* int (void *ctx, int HS) */
/* b's function called name, or NULL. */
void *backend_get_proc(const backend *b, const char *name);
/* 1 when b's attention_forward saves the log-sum-exp (and its output) in
 * probs instead of the probabilities, for heads of HS
 * (backend_attention_saved_floats); 0 for a backend without the function. */
int backend_attention_saves_lse(const backend *b, int HS);
/* The same without an instance, by device name ("cpu"): for checks made
 * before a backend exists. NULL for a device without the function. */
void *backend_reg_get_proc(const char *device, const char *name);

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
 * gemm:jit". A batch-invariant backend keeps computing in fp32. ERR_INPUT on
 * a backend without it (the CUDA one chooses its precision at creation). */
int backend_cpu_set_bf16(backend *b, int on, char *impl, size_t cap);
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
 * ERR_INPUT with the reason when this CPU cannot run p at speed (int8:
 * no AVX2, or BERTC_CPU_ISA below avx2; bf16: no AVX512-BF16, or
 * BERTC_CPU_ISA below avx512), for another precision, or for a backend
 * without answers in p. kernel (may be NULL) gets the kernel that runs
 * ("avx2", "avxvnni", "avx512vnni", "avx512bf16"). */
int backend_set_answer_precision(backend *b, precision_kind p, char *kernel, size_t cap);
/* The check alone, without a backend (bertc version, option parsing):
 * whether the CPU answers in p. */
int backend_answer_check(precision_kind p, char *kernel, size_t cap);
/* A line on the device's kernels, what = "isa" (the CPU's level), "gemm"
 * (the GEMM library) or "kernels" (every family's variant): buf, "" when
 * the device has none. */
char *backend_kernel_info(const char *device, const char *what, char *buf, size_t cap);
/* --precision auto for a GPU of this compute capability: bf16 from 8.0,
 * fp16 below (7.5 is the oldest the CUDA backend is built for). Defined in
 * backend/precision.c; the CUDA module gets it through its host table. */
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
