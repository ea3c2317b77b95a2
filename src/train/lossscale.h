/* Dynamic loss scaling for fp16, as torch.cuda.amp.GradScaler with its
 * defaults: the scale starts at 2^16, is halved after a step whose
 * gradients hold an inf or a NaN (the step is skipped and counted), and is
 * doubled after 2000 clean steps in a row (only when the doubled scale is
 * still a finite float, as torch). With every other precision the scaler
 * is disabled: the scale stays 1, and a non-finite step is still skipped
 * and counted (optim_step skips it) but changes nothing here except the
 * count.
 *
 * Usage in the trainer, one optimizer step:
 *
 *   loss_scaler ls;
 *   lossscale_init(&ls, precision_needs_loss_scaling(info.precision));   // once
 *   ...
 *   float s = lossscale_scale(&ls);
 *   for each micro-batch k:  bert_backward(model, w_k * s);               // scaled loss
 *   optim_step(opt, params, grads, &oc, step, lossscale_unscale(&ls), &res);
 *   lossscale_update(&ls, res.skipped);        // res.skipped: inf/NaN found, step skipped
 *   metrics: loss_scale = lossscale_scale(&ls) after the update (or before: say which),
 *            skipped steps = ls.skipped
 *
 * Checkpoints (state.json) hold scale, growth_tracker and skipped;
 * lossscale_restore checks them. */
#ifndef BERTC_LOSSSCALE_H
#define BERTC_LOSSSCALE_H

#include <stdint.h>

#define LOSSSCALE_INIT 65536.0f     /* 2^16 */
#define LOSSSCALE_GROWTH 2.0f
#define LOSSSCALE_BACKOFF 0.5f
#define LOSSSCALE_INTERVAL 2000

typedef struct {
    int enabled;            /* 1 for fp16 */
    float scale;            /* the factor the loss is multiplied by (1 when disabled) */
    int32_t growth_tracker; /* clean steps since the last change, 0 .. LOSSSCALE_INTERVAL - 1 */
    int64_t skipped;        /* steps skipped for non-finite gradients, in total */
    int64_t skipped_in_row; /* the current run of skipped steps (0 after a clean one) */
} loss_scaler;

void lossscale_init(loss_scaler *s, int enabled);
/* The multiplier for the loss (bert_backward's grad_scale factor). */
float lossscale_scale(const loss_scaler *s);
/* 1 / scale, for optim_step's grad_unscale. */
float lossscale_unscale(const loss_scaler *s);
/* After an optimizer step: found_inf = 1 when its gradients were not
 * finite (optim_result.skipped). Returns 1 when the scale changed. */
int lossscale_update(loss_scaler *s, int found_inf);
/* Restores a checkpoint's state; ERR_INPUT (message names the field) when
 * the scale is not a positive finite float, the tracker is outside
 * 0 .. LOSSSCALE_INTERVAL - 1 or skipped is negative, or when a disabled
 * scaler is given a scale other than 1. */
int lossscale_restore(loss_scaler *s, int enabled, float scale, int32_t growth_tracker, int64_t skipped);

#endif
