/* The forward and backward passes of one optimizer step: the step's rows
 * (windows of a features table) in micro-batches with gradient
 * accumulation, each micro-batch padded or packed (model/pack.h), into
 * freshly zeroed gradients. `bertc train` runs it every step (run_dp.c
 * adds data parallel's shares and sums and the out-of-memory back-off,
 * run_step.c the loader, the loss scaler and AdamW) and `bertc bench`
 * times it, so that the benchmark measures what training runs.
 *
 *   train_step_opts so = {.model = m, .f = &f, .mb = &mb, .micro = 8, .micro_batches = 2,
 *                         .packing = PACKING_NONE, .drop_hidden = 0.1f, .drop_attn = 0.1f,
 *                         .seed = 42, .step = step, .scale = 1.0f};
 *   rc = train_step_grads(&so, idx, 0, count, count, &loss);
 *   if (!rc) rc = optim_step(opt, bert_model_params(m), bert_model_grads(m), &oc, step, 1.0f, &res);
 *
 * Micro-batch k of the step (its rows idx[k * micro ..]) draws its dropout
 * masks from the stream (seed, step * micro_batches + k); a packed
 * micro-batch that fits the model's max_tokens in one piece draws the masks
 * of the padded one, a later piece of one cut by max_tokens draws from
 * seed + piece. Each micro-batch's (each piece's) mean loss is weighted by
 * its share of the step's rows, so the gradient is that of the mean over
 * all of them whatever the micro-batch size.
 *
 * Test hook: BERTC_DEBUG_OOM=N[@S] fails a micro-batch of more than N rows
 * from step S on (1-based; 1 when not given) as the CUDA backend does when
 * it runs out of memory. */
#ifndef BERTC_TRAIN_STEP_H
#define BERTC_TRAIN_STEP_H

#include "data/features.h"
#include "data/loader.h"
#include "model/bert.h"

#include <stdint.h>

/* Wall seconds, added to: gathering, packing and forward; backward. */
typedef struct {
    double forward_s, backward_s;
} train_step_timing;

typedef struct {
    bert_model *model;
    const features *f;         /* the windows the rows index, with their labels */
    loader_batch *mb;          /* one micro-batch's host buffers: cap >= micro, T = f->T */
    int micro;                 /* rows per micro-batch */
    int micro_batches;         /* micro-batches of a full step (numbers the dropout streams) */
    packing_kind packing;
    float drop_hidden, drop_attn;
    uint64_t seed;             /* of the dropout masks */
    int64_t step;              /* the optimizer step, 0-based */
    float scale;               /* the loss scale (1: none) */
    /* Data parallel: armed (bert_model_set_grads_ready) for the backward
     * that ends these rows, so that each gradient bucket's sum across
     * processes starts as soon as it is final; NULL: none. */
    bert_grads_ready_fn ready;
    void *ready_arg;
    train_step_timing *timing; /* NULL: not timed */
} train_step_opts;

/* One unit of a step's forward and backward passes: a micro-batch, or,
 * packed, each piece of one that fits the model's tokens (pack_cut). The
 * one cut of a step, for the passes here and a pipeline's units
 * (run_pipe.c). */
typedef struct {
    int k;     /* the step's micro-batch (global index: numbers its dropout stream) */
    int r0, n; /* rows idx[r0 .. r0 + n) of the step's list */
    int piece; /* packed: the piece of micro-batch k (its dropout seed is seed + piece) */
    int rows;  /* N: n * T padded, the real tokens packed */
    int B;     /* the rows of micro-batch k */
} train_unit;

/* A step's units and the host buffers of one packed piece. */
typedef struct {
    train_unit *u;
    int n, cap;
    int32_t *ids, *types, *cu; /* a packed piece (train_units_batch); one block at ids */
    int *len;                  /* a micro-batch's window lengths */
    int micro;                 /* what the buffers hold: micro * T tokens */
} train_units;

/* The units of rows idx[first .. first + len) of a step (f's windows), in
 * micro-batches of micro rows (first a multiple of micro), packed pieces
 * of at most max_tokens tokens when packing; 0 or an err.h code. */
int train_units_plan(train_units *us, const features *f, packing_kind packing, const int32_t *idx, int first, int len,
                     int micro, int64_t max_tokens);
/* Unit i's rows gathered into mb, packed into us's buffers when packing, as
 * a batch. */
void train_units_batch(train_units *us, int i, loader_batch *mb, const features *f, const int32_t *idx,
                       packing_kind packing, bert_batch *b);
/* Unit u's dropout stream: (seed + piece, step * micro_batches + k). */
philox_stream train_unit_stream(const train_unit *u, uint64_t seed, int64_t step, int micro_batches);
void train_units_free(train_units *us);

/* Zeroes the gradients, then runs forward and backward over rows
 * idx[first .. first + len) of a step of count rows, in micro-batches of
 * o->micro. first is a multiple of o->micro (one process: first 0, len
 * count; data parallel: this rank's share, dist_share), so micro-batch k
 * here is the step's micro-batch first / micro + k, and every weight is a
 * share of all count rows. *loss: the weighted loss of these rows. */
int train_step_grads(const train_step_opts *o, const int32_t *idx, int first, int len, int count, double *loss);
/* The test hook above: ERR_RUNTIME, as out of memory, when a micro-batch of
 * `rows` rows in step `step` (1-based) is to fail; 0 otherwise. Pipeline
 * stages (run_pipe.c) call it for their own units. */
int train_step_debug_oom(int64_t step, int rows);

#endif
