/* The batch-invariant bf16 linear layer of inference: out[N][OC] = in[N][C]
 * @ W[OC][C]^T + b (W in PyTorch's layout, as backend.h's matmul), with the
 * operands rounded to bf16 (bf16.h: nearest even) and fp32 sums.
 *
 * W is rounded once (gemm_bf16_prepare), the rows of in in every call. Each
 * output element is one fp32 chain over the pairs of k ascending, as
 * AVX512-BF16's VDPBF16PS computes a lane (Intel's definition, which Zen 4
 * follows bit for bit):
 *   s = +0
 *   for each pair p = 0, 1, ...:  s = s + a[2p+1] * w[2p+1]   (the odd one first)
 *                                 s = s + a[2p] * w[2p]
 *   out = s + b[o]                 (plain fp32 add; b = 0 without bias)
 * where each product is exact (two 8-bit significands), each add rounds to
 * nearest even with subnormal inputs read as zero and a subnormal result
 * flushed to zero (gemm_bf16_step), and a[C] = w[C] = 0 when C is odd. So a
 * row's bits depend only on that row, W and b: not on N, the other rows,
 * the thread count or the kernel.
 *
 * The fast kernel is VDPBF16PS; the scalar kernel computes the same steps in
 * portable C (exact products in double, one rounding to float, then the
 * flush), and gemm_bf16_ref is the definition as plain loops. Which kernel
 * runs: cpu_kernel_level(CPU_K_GEMM_BF16) (cpu_isa.h: avx512 needs
 * AVX512-BF16), and cpu_kernel_fast says whether this CPU runs it fast.
 *
 * nthreads <= 1 (or a small product) runs on the calling thread without an
 * OpenMP region. Working memory (the rounded rows, a scratch tile per
 * thread) is gemm_ws.h's per-thread buffer. */
#ifndef BERTC_BACKEND_CPU_GEMM_BF16_H
#define BERTC_BACKEND_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

typedef struct gemm_bf16_weights gemm_bf16_weights;

/* Rounds W (OC rows of C floats, row stride ldw) to bf16 and keeps bias (OC
 * floats; NULL: none), packed for the kernels. NULL on out of memory. */
gemm_bf16_weights *gemm_bf16_prepare(const float *W, long ldw, const float *bias, int OC, int C);
void gemm_bf16_free(gemm_bf16_weights *w);
/* The bytes it holds (the packed bf16 weights are about 2 x OC x C). */
size_t gemm_bf16_bytes(const gemm_bf16_weights *w);

/* out (N rows, row stride ldout) = the layer applied to in (N rows of C,
 * row stride ldin), as above. */
void gemm_bf16(const gemm_bf16_weights *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads);
/* The same bits by plain loops: the definition, and the path when working
 * memory runs out. */
void gemm_bf16_ref(const gemm_bf16_weights *w, int N, const float *in, long ldin, float *out, long ldout);

/* One step of the chain: s + a * b as VDPBF16PS adds one product. */
float gemm_bf16_step(float s, uint16_t a, uint16_t b);
/* The rounded weight w[o][k] of a prepared layer. */
uint16_t gemm_bf16_weight(const gemm_bf16_weights *w, int o, int k);

/* Nonzero: calls from now on run the scalar kernel (the same bits; for the
 * tests). */
void gemm_bf16_force_scalar(int on);
/* The kernel calls run now: "avx512bf16" or "scalar". */
const char *gemm_bf16_kernel(void);

#endif
