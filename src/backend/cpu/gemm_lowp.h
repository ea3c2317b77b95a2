/* The low-precision linear layers of inference: out[N][OC] = in[N][C] @
 * W[OC][C]^T + b (W in PyTorch's layout, as backend.h's matmul) with int8
 * products and exact int32 sums (gemm_int8.h says how they round) or bf16
 * products and fp32 sums (gemm_bf16.h). W is prepared once (quantised or
 * rounded, and packed), the rows of in are quantised or rounded in every
 * call.
 *
 * Both are batch-invariant: a row's bits depend only on that row, W and b,
 * not on N, the other rows, the thread count or the kernel. Each kind has a
 * fast kernel (AVX512-VNNI's VPDPBUSD, AVX512-BF16's VDPBF16PS) and a scalar
 * one in portable C with the same bits; cpu_kernel_level(CPU_K_GEMM_INT8 or
 * CPU_K_GEMM_BF16) picks (cpu_isa.h), and cpu_kernel_fast says whether this
 * CPU runs the fast one (a caller that needs speed refuses without it:
 * the scalar kernels are for tests and references).
 *
 * nthreads <= 1 (or a small product) runs on the calling thread without an
 * OpenMP region, so it may be called from inside one. Working memory (the
 * packed rows, a scratch tile per thread) is gemm_ws.h's per-thread buffer. */
#ifndef BERTC_BACKEND_CPU_GEMM_LOWP_H
#define BERTC_BACKEND_CPU_GEMM_LOWP_H

#include <stddef.h>

typedef enum { GEMM_LOWP_INT8, GEMM_LOWP_BF16 } gemm_lowp_kind;

typedef struct gemm_lowp_layer gemm_lowp_layer;

/* Prepares W (OC rows of C floats, row stride ldw) and keeps bias (OC
 * floats; NULL: none). NULL on out of memory. */
gemm_lowp_layer *gemm_lowp_prepare(gemm_lowp_kind kind, const float *W, long ldw, const float *bias, int OC, int C);
void gemm_lowp_free(gemm_lowp_layer *w);
/* The bytes it holds (about OC x C for int8, twice that for bf16). */
size_t gemm_lowp_bytes(const gemm_lowp_layer *w);

/* out (N rows of OC, row stride ldout) = the layer applied to in (N rows of
 * C, row stride ldin). */
void gemm_lowp(const gemm_lowp_layer *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads);
/* Up to GEMM_LOWP_MAX_N layers of one kind and the same shape on the same
 * input (Q, K and V): out[i] = w[i] applied to in, the rows quantised or
 * rounded once for all; each out[i] the bits gemm_lowp gives. */
enum { GEMM_LOWP_MAX_N = 4 };
void gemm_lowp_n(const gemm_lowp_layer *const *w, int nw, int N, const float *in, long ldin, float *const *out,
                 long ldout, int nthreads);
/* The same bits by plain loops: the definition, and the path when working
 * memory runs out. */
void gemm_lowp_ref(const gemm_lowp_layer *w, int N, const float *in, long ldin, float *out, long ldout);

/* Nonzero: calls of this kind from now on run its scalar kernel (the same
 * bits; for the tests). */
void gemm_lowp_force_scalar(gemm_lowp_kind kind, int on);
/* The kernel calls of this kind run now: "avx512vnni", "avxvnni", "avx2", "avx512bf16" or "scalar". */
const char *gemm_lowp_kernel(gemm_lowp_kind kind);
/* "int8", "bf16" */
const char *gemm_lowp_name(gemm_lowp_kind kind);

#endif
