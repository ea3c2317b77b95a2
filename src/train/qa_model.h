/* A model dir opened for training or inference: its tokenizer, its config
 * and parameters, and a bert_model on the CPU backend; plus running it over
 * features (logits, predictions, evaluation). Shared by `bertc train`,
 * `predict`, `ask` and `demo`. */
#ifndef BERTC_QA_MODEL_H
#define BERTC_QA_MODEL_H

#include "backend/backend.h"
#include "data/features.h"
#include "data/squad.h"
#include "eval/squad_eval.h"
#include "infer/predict.h"
#include "model/bert.h"
#include "model/config.h"
#include "model/params.h"
#include "text/tokenizer.h"

#include <signal.h>
#include <stdint.h>

typedef struct {
    vocab *voc;
    tokenizer *tok;
    bert_config cfg;
    param_table table;
    float *host_params;   /* the block as loaded (table order) */
    int qa_initialised;   /* qa_outputs was missing and got a random init */
    backend be;
    int have_backend;
    bert_model *model;
    int max_B, T;
} qa_model;

/* Loads DIR (tokenizer, config, weights; seed initialises a missing
 * qa_outputs). Does not create the backend model yet. */
int qa_model_load(qa_model *m, const char *dir, uint64_t seed);
/* Creates the CPU backend (threads, 0 = all cores) and the bert_model for
 * micro-batches of max_B x T, and uploads the parameters. ERR_INPUT when T
 * exceeds max_position_embeddings. */
int qa_model_start(qa_model *m, int threads, int max_B, int T);
void qa_model_free(qa_model *m);

/* Start and end logits of every window of f ([f->n * f->T] each, host),
 * dropout off, in micro-batches of up to m->max_B. Stops early with
 * ERR_STOPPED when *stop becomes non-zero (stop may be NULL). */
int qa_model_logits(qa_model *m, const features *f, float *start, float *end, volatile sig_atomic_t *stop);
/* Logits -> predictions (postprocess_predictions). */
int qa_model_predict(qa_model *m, const squad_data *d, const features *f, int n_best, int max_answer_length,
                     qa_predictions *out, volatile sig_atomic_t *stop);
/* Predictions -> EM/F1 on d (SQuAD metric). */
int qa_predictions_eval(const squad_data *d, const qa_predictions *p, eval_result *r);

#endif
