/* The trainer's checkpoint contents, on top of ckpt.h's atomic dirs:
 *
 *   model.safetensors      fp32 master weights, transformers names
 *   optimizer.safetensors  Adam m and v: exp_avg.<name>, exp_avg_sq.<name>
 *   state.json             train_state (state.h)
 *   config.json, vocab.txt, tokenizer_config.json   copies, so that a
 *                          checkpoint dir is also a model dir that
 *                          `bertc predict --model` loads
 *   MANIFEST               CRC32C of each (ckpt.h) */
#ifndef BERTC_TRAIN_CKPT_H
#define BERTC_TRAIN_CKPT_H

#include "model/config.h"
#include "model/params.h"
#include "train/lossscale.h"
#include "train/state.h"

int train_ckpt_save(const char *run_dir, const char *model_dir, const bert_config *cfg, const param_table *t,
                    const float *params, const float *m, const float *v, const train_state *s, int keep);
/* Loads a checkpoint dir (verified by the caller) into params, m, v (t->total
 * floats each) and s. ERR_INPUT naming the file and tensor when a tensor is
 * missing or has another shape (a checkpoint of another model). */
int train_ckpt_load(const char *dir, const param_table *t, float *params, float *m, float *v, train_state *s);

/* The loss scaler's part of the state: scale and growth tracker (its
 * skipped count is skipped_steps, which the optimizer keeps as well). */
void train_ckpt_put_scaler(train_state *s, const loss_scaler *ls);
/* The scaler of a loaded state (lossscale_restore): ERR_INPUT naming
 * `where` (the state.json) and the field when the values are not a
 * scaler's (a scale that is not a positive float32 value, or not 1 when
 * enabled is 0; a growth tracker outside 0 .. LOSSSCALE_INTERVAL - 1). */
int train_ckpt_get_scaler(const train_state *s, int enabled, loss_scaler *ls, const char *where);

#endif
