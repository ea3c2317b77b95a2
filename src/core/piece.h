/* The piece of a block of n floats that rank r of N owns wherever a block
 * is spread over ranks: the fixed-order reduce-scatter and the gathers
 * (comm/dist.c), NCCL's reduce-scatter and all-gather (the CUDA module's
 * cuda_nccl.c), the sharded optimizer's Adam state (train/run_shard.c) and
 * its memory plan (model/memory.c). [r*q, (r+1)*q) with q = n / N, the
 * last rank's also holding the n - N*q floats left over: equal pieces plus
 * a short tail are what ncclReduceScatter and ncclAllGather take. */
#ifndef BERTC_CORE_PIECE_H
#define BERTC_CORE_PIECE_H

#include <stddef.h>

static inline void piece_of(size_t n, int N, int r, size_t *off, size_t *len)
{
    if (N < 1) N = 1;
    size_t q = n / (size_t)N;
    *off = q * (size_t)r;
    *len = r == N - 1 ? n - *off : q;
}

#endif
