/* One inference run: a QA model over the windows of some questions, the
 * answers chosen (postprocess_predictions), written, and scored when the
 * questions carry gold answers. `bertc predict` and `bertc run_squad` run
 * it from a model dir and a SQuAD file; `bertc ask` and the trainer's
 * evaluation on an open model and built features; `bertc serve` on the
 * logits its batcher computed. A new front end fills the params and calls
 * it.
 *
 *   infer_params ip = {.model_dir = dir, .bo = &bo, .T = 384, .stride = 128, .batch = 32,
 *                      .data_path = "dev.json", .post = {.n_best = 20, .max_answer_length = 30},
 *                      .pred_path = "pred.json", .name = "predict"};
 *   infer_result r;
 *   rc = infer_run(&ip, &r);
 *   ... r.pred, r.score ...
 *   infer_result_free(&r);
 *
 * The steps, each from what the params give:
 *   model      model (loaded and started), or model_dir opened on *bo
 *              (qa_model_load, qa_model_select; a warning when it has no
 *              qa_outputs), started once the windows are known for
 *              micro-batches of min(batch, windows) windows
 *   questions  data with its windows f, or data_path read (squad_load)
 *              and cut into windows of T tokens with stride
 *              (qa_model_fit_window, features_build; SQuAD 2.0 windows
 *              with post.version_2_with_negative)
 *   logits     start_logits/end_logits when given, else `logits` when given
 *              (the trainer's evaluation, spread over its processes), else
 *              the model's (qa_model_logits); written to dump_dir when given
 *   answers    postprocess_predictions with post; then the score (score: SQuAD v1.1's EM/F1, or evaluate-v2.0.py's
 *              with post.version_2_with_negative), the files, and the
 *              summary line "NAME: Q questions, W windows, S.Ss -> PRED"
 *              on stderr when name is given. */
#ifndef BERTC_INFER_H
#define BERTC_INFER_H

#include "backend/select.h"
#include "data/features.h"
#include "data/squad.h"
#include "eval/squad_eval.h"
#include "infer/predict.h"
#include "infer/qa_model.h"

#include <signal.h>
#include <stdint.h>

/* Logits made elsewhere: start and end (f->n * f->T floats each) for the
 * windows f, as qa_model_logits would make them (0 or an err.h code). */
typedef int (*infer_logits_fn)(void *arg, const features *f, float *start, float *end);

typedef struct {
    /* the model: one of (neither when the logits or a logits hook are given) */
    qa_model *model;
    const char *model_dir;
    /* with model_dir: the backend, the windows (qa_model_fit_window's
     * given flags), rows per forward, CPU threads, and qa_model's packing */
    const backend_opts *bo;
    int T, T_given, stride, stride_given, max_query_length, batch, threads;
    packing_kind packing;
    int64_t max_tokens;
    /* the questions: data with f, or data_path */
    const squad_data *data;
    const features *f;
    const char *data_path;
    /* the logits ([f->n * f->T] each), or NULL for the model's */
    const float *start_logits, *end_logits;
    infer_logits_fn logits; /* NULL: the model's */
    void *logits_arg;
    postprocess_opts post;
    /* files written when given: start_logits.npy and end_logits.npy in
     * dump_dir,
     * predictions.json, nbest_predictions.json, null_odds.json */
    const char *dump_dir, *pred_path, *nbest_path, *null_odds_path;
    int score;                  /* score the answers against the gold ones */
    const char *name;           /* the summary line's name; NULL: no line */
    volatile sig_atomic_t *stop; /* ERR_STOPPED once it is non-zero (may be NULL) */
} infer_params;

typedef struct {
    qa_predictions pred;
    eval_result score;     /* with p->score: exact_match, f1, total */
    int questions, windows;
} infer_result;

/* Runs p; r is filled (and to be freed) whatever it returns. */
int infer_run(const infer_params *p, infer_result *r);
void infer_result_free(infer_result *r);

#endif
