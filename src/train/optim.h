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
 * for each micro-batch, then one optim_step. */
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
    /* The global norm's square, given (of the gradients as they are, before
     * grad_unscale): a pipeline stage's optimizer holds its own tensors
     * only, and the norm that clipping and the finiteness check use is over
     * every stage's (summed in stage order). NULL: the gradients' own. */
    const double *grad_sum_squares;
} optim_config;

/* The defaults of DESIGN.md: lr 3e-5, betas 0.9/0.999, eps 1e-8, weight
 * decay 0.01, clipping at 1.0; warm-up and total 0 (set them). */
optim_config optim_config_default(void);

typedef struct optim optim;

/* Adam state for the table's parameters on be, zeroed, t = 0. The table
 * must outlive the optimizer (it is the model's: bert_model_table). */
int optim_create(optim **out, backend *be, const param_table *t);
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

/* Adam updates applied so far (torch's state["step"]); steps skipped so far. */
int64_t optim_t(const optim *o);
int64_t optim_skipped(const optim *o);
/* Number of floats in m (and in v): the table's total. */
size_t optim_state_floats(const optim *o);
/* Host copies of the state for checkpoints: m and v hold
 * optim_state_floats floats each, in param_table order. */
int optim_get_state(optim *o, float *m, float *v, int64_t *t, int64_t *skipped);
int optim_set_state(optim *o, const float *m, const float *v, int64_t t, int64_t skipped);

#endif
