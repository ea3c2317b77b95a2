/* The training data loader: which features go into each optimizer step.
 *
 * An epoch is a permutation of the features (the identity with
 * --no-shuffle), a pure function of (seed, epoch), so the loader's whole
 * state is (epoch, cursor) and a resumed run draws the same batches. Each
 * optimizer step takes the next `batch` features of the permutation; the
 * last step of an epoch takes what is left (as a PyTorch DataLoader with
 * drop_last=False), so an epoch is ceil(n / batch) steps and no feature is
 * lost. The trainer splits a step into micro-batches of at most micro rows
 * (gradient accumulation) and gathers their rows with loader_gather. */
#ifndef BERTC_LOADER_H
#define BERTC_LOADER_H

#include "data/features.h"

#include <stdint.h>

typedef struct {
    int n;            /* features */
    int batch;        /* features per optimizer step */
    int shuffle;
    uint64_t seed;
    int64_t epoch;    /* the epoch the next step comes from */
    int64_t cursor;   /* features of it already consumed */
    int32_t *order;   /* [n] the permutation of `epoch` */
    int64_t order_epoch;
} loader;

int loader_init(loader *l, int n, int batch, int shuffle, uint64_t seed);
void loader_free(loader *l);
/* ceil(n / batch) */
int64_t loader_steps_per_epoch(const loader *l);
/* Moves to a saved position; ERR_INPUT when the cursor is not a step
 * boundary of this data (which means the checkpoint is for other data). */
int loader_seek(loader *l, int64_t epoch, int64_t cursor);
/* The next step: idx[0..*count) (idx has room for batch), the epoch they
 * belong to; advances (to the next epoch after its last step). */
void loader_next(loader *l, int32_t *idx, int *count, int64_t *epoch);
/* The permutation of one epoch (identity when !shuffle). */
void loader_epoch_order(uint64_t seed, int64_t epoch, int shuffle, int32_t *order, int n);

/* Host buffers of one micro-batch (one allocation). */
typedef struct {
    int cap, T, B;
    int32_t *input_ids, *token_type_ids, *attention_mask; /* [cap*T] */
    int32_t *start_positions, *end_positions;             /* [cap] */
} loader_batch;

int loader_batch_init(loader_batch *b, int cap, int T);
void loader_batch_free(loader_batch *b);
/* Copies features idx[0..B) into b (B <= cap, f->T == b->T). */
void loader_gather(loader_batch *b, const features *f, const int32_t *idx, int B);

#endif
