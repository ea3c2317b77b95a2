/* The CUDA backend's private part of its working memory: the operand
 * alignment its GEMMs tell cuBLASLt. The sizes themselves are the
 * backend-neutral formulas of backend/workspace_rules.h, which the memory
 * planner uses too. */
#ifndef BERTC_CUDA_WS_H
#define BERTC_CUDA_WS_H

#include "backend/workspace_rules.h"

#include <stddef.h>
#include <stdint.h>

/* The largest power of two (up to 256) that divides every address a GEMM
 * operand reaches: the base, each batch (stride) and each column (ld).
 * cuBLASLt must not pick a kernel that assumes more alignment than that
 * (cuda_gemm tells it through the preference; tests/cudaemu checks it). */
static inline uint32_t cuda_operand_align(const void *p, long long ld, long long stride, int batch, size_t elem)
{
    uintptr_t a = (uintptr_t)p | (uintptr_t)((size_t)ld * elem);
    if (batch > 1) a |= (uintptr_t)((size_t)stride * elem);
    uint32_t al = 256;
    while (al > 1 && (a % al) != 0) al /= 2;
    return al;
}

#endif
