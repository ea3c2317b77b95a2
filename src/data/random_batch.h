/* The benchmarks' random batch: what `bertc bench` trains on and tests/gpu's
 * checks run (bench/gpu/gpu_torch.py and bench/train_speed/torch_step.py
 * shape theirs alike): B windows of T tokens, ids drawn by splitmix64 from
 * seed in [lo_id, V); every other window (the odd ones) padded over its last
 * quarter; the first quarter of type 0 and the rest of the real tokens of
 * type 1; the start a random real position and the end up to 7 after it,
 * within the window. The draws go window by window: its real tokens' ids,
 * then its start and end. ids, types, mask: B x T; start, end: B. */
#ifndef BERTC_RANDOM_BATCH_H
#define BERTC_RANDOM_BATCH_H

#include <stdint.h>

void random_batch_fill(int32_t *ids, int32_t *types, int32_t *mask, int32_t *start, int32_t *end, int B, int T, int V,
                       int lo_id, uint64_t seed);

#endif
