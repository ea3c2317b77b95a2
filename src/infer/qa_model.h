/* A model dir opened on a backend and run for answers: its tokenizer, its
 * config and parameters, and a bert_model on the backend that --device and
 * --precision select (backend/select.h); running it over features
 * (logits, predictions). infer_run (infer/infer.h) drives it for `bertc
 * predict`, `run_squad`, `ask`, `serve` and the trainer's evaluation; the
 * trainer (train/) opens its model dir with it too and trains the
 * bert_model it holds.
 *
 *   qa_model m;
 *   backend_opts bo = backend_opts_default();
 *   bo.device = device; bo.precision = precision; bo.threads = threads;
 *   qa_model_load(&m, dir, seed);
 *   qa_model_select(&m, &bo);      // optional: fail early (before reading data) on a bad
 *                                  // --device/--precision; m.info says what was chosen
 *   ... validate the other inputs ...
 *   qa_model_start(&m, &bo, max_B, T);   // selects (if not done), builds the model, and prints
 *                                        // the CPU fall-back notice (unless bo.quiet)
 *
 * The fall-back notice is held back until qa_model_start so that an input
 * error found in between stays the only line on stderr. */
#ifndef BERTC_QA_MODEL_H
#define BERTC_QA_MODEL_H

#include "backend/backend.h"
#include "backend/select.h"
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
    backend_info info;          /* what backend_select chose (valid once have_backend) */
    precision_kind asked;       /* the --precision asked for, for the fall-back notice */
    int notice_due;             /* the fall-back notice is still to be printed */
    bert_model *model;
    int max_B, T;
    int training;               /* set by the trainer: gradients (else bert_model_opts' forward_only) */
    recompute_kind recompute;   /* RECOMPUTE_LAYER from qa_model_load (answers: one layer's activations);
                                 * the trainer sets --recompute's before qa_model_start */
    /* Set before qa_model_start. PACKING_VARLEN (--packing varlen): the
     * model takes packed micro-batches of at most max_tokens real tokens (0:
     * max_B * T; QA_MAX_TOKENS_AUTO: qa_model_start picks, for a caller that
     * cuts its pieces by bert_model_max_tokens as qa_model_logits does), and
     * qa_model_logits runs the windows grouped by length, real tokens only
     * (padding positions' logits are -inf). */
    packing_kind packing;
    int64_t max_tokens;
} qa_model;

#define QA_MAX_TOKENS_AUTO ((int64_t)-1)
/* Packed answers on the CPU with no --max-tokens (QA_MAX_TOKENS_AUTO; serve,
 * which fills a forward with up to max_B whole windows, keeps 0): real
 * tokens per forward pass such that the FFN's activations of one pass
 * (tokens x intermediate_size floats) take about QA_CPU_FFN_BYTES, at least
 * one window of T, at most max_B x T. The activations then stay in the
 * caches from one op to the next: with all-MiniLM-L6-v2 (2,048 tokens) int8
 * and bf16 answers took 6-10 % less time than at 32 windows of 384, fp32 the
 * same (bench/RESULTS.md, 2026-12-06). A GPU keeps max_B x T. */
#define QA_CPU_FFN_BYTES ((int64_t)12 << 20)
int64_t qa_model_cpu_tokens(const bert_config *cfg, int max_B, int T);

/* Loads DIR (tokenizer, config, weights; seed initialises a missing
 * qa_outputs). Does not create the backend model yet. */
int qa_model_load(qa_model *m, const char *dir, uint64_t seed);
/* Creates the backend bo asks for (backend_select, always quietly: the
 * notice of a fall-back to the CPU waits for qa_model_start) and records
 * what was chosen in m->info. ERR_INPUT for a combination backend_select
 * refuses (--device cpu with --precision fp16, ...), ERR_RUNTIME (or
 * ERR_INPUT in a build without CUDA) for --device cuda without a usable
 * GPU. Calling it again is an error. */
int qa_model_select(qa_model *m, const backend_opts *bo);
/* predict and ask: the window length and stride for this model. When the
 * user gave no --max-seq-length and the default T is longer than the
 * model's max_position_embeddings (a small model trained by `bertc demo`),
 * T becomes max_position_embeddings, and an ungiven --doc-stride that no
 * longer fits becomes T / 4. Given values are left for qa_model_start to
 * check. Prints one info line when it changes something. */
void qa_model_fit_window(const qa_model *m, int *T, int T_given, int *stride, int stride_given);
/* ERR_INPUT when T exceeds max_position_embeddings; then qa_model_select
 * unless it was called; then the bert_model for micro-batches of max_B x T
 * on that backend, with the parameters uploaded. Prints the fall-back
 * notice (one line on stderr) when --device auto fell back to the CPU and
 * bo->quiet is 0. */
int qa_model_start(qa_model *m, const backend_opts *bo, int max_B, int T);
void qa_model_free(qa_model *m);

/* Start and end logits of every window of f ([f->n * f->T] each, host),
 * dropout off, in micro-batches of up to m->max_B. Stops early with
 * ERR_STOPPED when *stop becomes non-zero (stop may be NULL). */
int qa_model_logits(qa_model *m, const features *f, float *start, float *end, volatile sig_atomic_t *stop);
/* qa_model_logits into arrays of its own (*start, *end: the caller frees
 * them, also after an error). */
int qa_model_logits_alloc(qa_model *m, const features *f, float **start, float **end, volatile sig_atomic_t *stop);
/* Logits -> predictions (postprocess_predictions with o). infer/infer.h
 * runs it all: the model, the files, the score. */
int qa_model_predict(qa_model *m, const squad_data *d, const features *f, const postprocess_opts *o,
                     qa_predictions *out, volatile sig_atomic_t *stop);

#endif
