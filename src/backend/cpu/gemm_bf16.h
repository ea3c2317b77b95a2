/* The bf16 kind of gemm_lowp.h (GEMM_LOWP_BF16): how it rounds, and what
 * its tests look into. The operands are rounded to bf16 (bf16.h: nearest
 * even) and summed in fp32.
 *
 * W is rounded once (gemm_lowp_prepare), the rows of in in every call. Each
 * output element is one fp32 chain over the pairs of k ascending, as
 * AVX512-BF16's VDPBF16PS computes a lane (Intel's definition, which the Zen 5
 * of bench/RESULTS.md follows bit for bit: test_gemm_bf16 checks it wherever
 * it runs):
 *   s = +0
 *   for each pair p = 0, 1, ...:  s = s + a[2p+1] * w[2p+1]   (the odd one first)
 *                                 s = s + a[2p] * w[2p]
 *   out = s + b[o]                 (plain fp32 add; b = 0 without bias)
 * where each product is exact (two 8-bit significands), each add rounds to
 * nearest even with subnormal inputs read as zero and a subnormal result
 * flushed to zero (gemm_bf16_step), and a[C] = w[C] = 0 when C is odd (the
 * kernels add more +0 products past C, to whole runs of words: s + 0 = s,
 * since s is never -0 nor subnormal). So a
 * row's bits depend only on that row, W and b: not on N, the other rows,
 * the thread count or the kernel.
 *
 * The fast kernel is VDPBF16PS; the scalar kernel computes the same steps in
 * portable C (exact products in double, one rounding to float, then the
 * flush). */
#ifndef BERTC_BACKEND_CPU_GEMM_BF16_H
#define BERTC_BACKEND_CPU_GEMM_BF16_H

#include "backend/cpu/gemm_lowp.h"

#include <stdint.h>

/* One step of the chain: s + a * b as VDPBF16PS adds one product. */
float gemm_bf16_step(float s, uint16_t a, uint16_t b);
/* The rounded weight w[o][k] of a bf16 layer. */
uint16_t gemm_bf16_weight(const gemm_lowp_layer *w, int o, int k);

#endif
