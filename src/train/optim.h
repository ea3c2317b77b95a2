/* The optimizer: AdamW as torch.optim.AdamW, the learning-rate schedule of
 * transformers' get_linear_schedule_with_warmup, global-norm gradient
 * clipping as torch.nn.utils.clip_grad_norm_, and a non-finite gradient
 * check (DESIGN.md, Numerics).
 *
 * The schedule is pure functions of the update index; the optimizer state
 * (Adam m and v in backend memory, and t, the number of updates applied) is
 * separate, so the trainer saves and restores each on its own. The
 * optimizer works on the whole parameter and gradient blocks of a
 * param_table; weight decay skips the tensors whose param_info.decay is 0.
 *
 * Gradient accumulation is the caller's: bert_backward(m, 1/micro_batches)
 * for each micro-batch, then one optim_step.
 *
 * Sharded (ZeRO stage 1, --shard-optimizer): optim_create_pieces keeps the
 * state of some ranges of the block only (a rank's pieces of the gradient
 * buckets, train/run_shard.c), and the step is split in two so that the
 * caller can sum the squared gradient norm over the ranks in between:
 * optim_sum_squares (this optimizer's ranges) and optim_apply (with the
 * global sum: the same norm, clipping and skip decision on every rank; only
 * the parameters of the ranges change). */
#ifndef BERTC_OPTIM_H
#define BERTC_OPTIM_H

#include "backend/backend.h"
#include "model/params.h"

#include <stdint.h>

/* Learning-rate multiplier of update k (0-based) of `total`, with `warmup`
 * warm-up updates: k / warmup during warm-up, then (total - k) / (total -
 * warmup), floored at 0 (each denominator at least 1, as transformers). */
double optim_lr_lambda(int64_t k, int64_t warmup, int64_t total);
/* Warm-up updates from --warmup as TrainingArguments.get_warmup_steps
 * reads it: a value >= 1 is a number of steps (truncated), a value in
 * [0, 1) a fraction of total, rounded up: ceil(total * warmup). */
int64_t optim_warmup_steps(double warmup, int64_t total);
/* clip_grad_norm_'s coefficient: max_norm / (norm + 1e-6), applied only
 * when below 1; returns 1 when clipping does not apply (max_norm <= 0). */
double optim_clip_coef(double norm, double max_norm);

typedef struct {
    double lr;            /* peak learning rate */
    double beta1, beta2;  /* 0.9, 0.999 */
    double eps;           /* 1e-8 */
    double weight_decay;  /* applied to tensors with param_info.decay */
    double max_grad_norm; /* <= 0: no clipping (the norm is still measured) */
    int64_t warmup_steps;
    int64_t total_steps;
} optim_config;

/* The defaults of DESIGN.md: lr 3e-5, betas 0.9/0.999, eps 1e-8, weight
 * decay 0.01, clipping at 1.0; warm-up and total 0 (set them). */
optim_config optim_config_default(void);

typedef struct optim optim;

/* Adam state for the table's parameters on be, zeroed, t = 0. The table
 * must outlive the optimizer (it is the model's: bert_model_table). */
int optim_create(optim **out, backend *be, const param_table *t);
/* optim_create, then a resumed run's state (m and v: t->total floats each,
 * steps and skipped as optim_set_state takes them) when m is not NULL. */
int optim_start(optim **out, backend *be, const param_table *t, const float *m, const float *v, int64_t steps,
                int64_t skipped);
/* Adam state for the nseg ranges [off[i], off[i] + len[i]) of the table's
 * block only (disjoint, any order), held packed in that order. */
int optim_create_pieces(optim **out, backend *be, const param_table *t, const size_t *off, const size_t *len,
                        int nseg);
void optim_free(optim *o);

typedef struct {
    double grad_norm;  /* global L2 norm before clipping (inf or nan when non-finite) */
    double clip_coef;  /* the factor the gradients were multiplied by (1: no clipping) */
    double lr;         /* the learning rate of this update */
    int skipped;       /* 1: a non-finite gradient, nothing was changed */
} optim_result;

/* One update: measures the global gradient norm, skips the update (counted;
 * state, parameters and t untouched) when a gradient is not finite,
 * otherwise clips and applies AdamW with lr = c->lr * lambda(k) where k is
 * the schedule's update index (the trainer's optimizer step count, skipped
 * steps included, as a LambdaLR stepped every iteration). grad_unscale
 * multiplies the gradients before everything (1, or 1/loss_scale for fp16);
 * the norm is that of the unscaled gradients. The gradient block is left
 * as it was (clipping is folded into the update). */
int optim_step(optim *o, float *params, const float *grads, const optim_config *c, int64_t k, float grad_unscale,
               optim_result *r);
/* optim_step in two halves: the sum of squares of the gradients of this
 * optimizer's ranges (each range's backend sum_squares, added in range
 * order: the whole block's is optim_step's own), and the step given the sum
 * of squares of all the gradients (as they are, before grad_unscale), which
 * updates the ranges' parameters only. optim_step(...) is
 * optim_apply(..., optim_sum_squares(o, grads), r). */
double optim_sum_squares(optim *o, const float *grads);
int optim_apply(optim *o, float *params, const float *grads, const optim_config *c, int64_t k, float grad_unscale,
                double sum_squares, optim_result *r);

/* Adam updates applied so far (torch's state["step"]); steps skipped so far. */
int64_t optim_t(const optim *o);
int64_t optim_skipped(const optim *o);
/* Number of floats in m (and in v): the table's total, or the ranges'. */
size_t optim_state_floats(const optim *o);
/* Host copies of the state for checkpoints: m and v hold
 * optim_state_floats floats each, in param_table order (the ranges' packed
 * in their order). */
int optim_get_state(optim *o, float *m, float *v, int64_t *t, int64_t *skipped);
int optim_set_state(optim *o, const float *m, const float *v, int64_t t, int64_t skipped);
/* m and v themselves (backend memory, optim_state_floats floats each):
 * the CPU backend's memory is the host's, so a caller there reads them
 * without a copy. */
void optim_state_memory(optim *o, const float **m, const float **v);
/* The state from the whole block's m and v (table->total floats each, a
 * checkpoint's): each range's part taken from its place. */
int optim_set_state_block(optim *o, const float *m, const float *v, int64_t t, int64_t skipped);

#endif
