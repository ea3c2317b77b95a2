/* Answer post-processing: start/end logits of every window -> the answer
 * text of every example, as transformers' utils_qa.py
 * postprocess_qa_predictions does it for run_qa.py (SQuAD v1.1, no null
 * answer; version_2_with_negative below):
 *
 *   per example, over its windows in feature order:
 *     the n_best start and n_best end indexes with the largest logits
 *     (np.argsort(x)[-1 : -n_best - 1 : -1]); for each (start, end) pair,
 *     skip it when either token is not context (offset -1), end < start, or
 *     end - start + 1 > max_answer_length; score = start + end logit (float32);
 *   keep the n_best best scores (a stable sort: equal scores keep their
 *   order); text = context[offset_begin(start) : offset_end(end)] in code
 *   points; when nothing is left, or only one empty text, "empty" with
 *   logits and score 0 goes first; probability = softmax of the scores
 *   (max subtracted first, float32 as numpy does for float32 scores).
 *
 * Ties between logits: np.argsort's default (introsort, and SIMD sorts on
 * AVX2/AVX-512 machines) orders equal values differently on different CPUs,
 * so no C code can match "numpy" on ties everywhere. Here equal logits are
 * ordered as np.argsort(x, kind="stable")[::-1] orders them: the higher
 * token index first. tools/postprocess_ref.py generates its reference that
 * way and reports how often the platform default would differ. */
#ifndef BERTC_PREDICT_H
#define BERTC_PREDICT_H

#include "data/features.h"
#include "data/squad.h"

typedef struct {
    char *text;              /* UTF-8, NUL-terminated */
    float start_logit, end_logit;
    float score;             /* start_logit + end_logit */
    double probability;      /* float32 softmax, or float64 when "empty" was inserted (as numpy) */
    int begin_cp, end_cp;    /* code point span in the context; -1 for "empty" */
} qa_answer;

typedef struct {
    int n;           /* examples (d->n) */
    qa_answer **nbest; /* [n][n_nbest[i]], best first; nbest[i][0].text is the prediction (v1) */
    int *n_nbest;
    /* SQuAD 2.0 (postprocess_opts' version_2_with_negative; all NULL / 0 otherwise): */
    int version_2_with_negative;
    int *has_null;     /* [n] the example has a window, so a null score */
    int *pred;         /* [n] index into nbest[i] of the prediction, -1 for the null answer "" */
    float *score_diff; /* [n] null score - best non-null start_logit - end_logit (null_odds.json) */
} qa_predictions;

#define PREDICT_N_BEST 20
#define PREDICT_MAX_ANSWER_LENGTH 30

/* How the answers are chosen:
 *
 *   postprocess_opts po = {.n_best = PREDICT_N_BEST, .max_answer_length = PREDICT_MAX_ANSWER_LENGTH};
 *
 * version_2_with_negative (SQuAD 2.0, utils_qa.py with
 * version_2_with_negative=True): per example the minimum null prediction
 * over its windows (score = [CLS] start + end logit; the first window with
 * the least) joins the candidates after every span (so it sorts after
 * spans of an equal score), is added back at the end when it falls out of
 * the n best, and has text "" (start 0, end 0, in the n-best with its
 * probability); "empty" is inserted when it is the only one. The best
 * non-null prediction is the first of the n-best whose text is not empty;
 * score_diff = null score - its start_logit - its end_logit (float32); the
 * prediction is "" when score_diff > null_score_diff_threshold (compared
 * in float32, as numpy 2 compares a float32 with a Python float; a NaN
 * threshold is ERR_INPUT), else that text. */
typedef struct {
    int n_best, max_answer_length;
    int version_2_with_negative;
    double null_score_diff_threshold;
} postprocess_opts;

/* start_logits and end_logits are [f->n, f->T]. Examples without a window
 * get "empty". NaN logits are an error (ERR_RUNTIME); bad feature tables
 * (example index or offsets out of range) are ERR_INPUT. */
int postprocess_predictions(const squad_data *d, const features *f, const float *start_logits, const float *end_logits,
                            const postprocess_opts *o, qa_predictions *out);
void qa_predictions_free(qa_predictions *p);
/* The prediction of example i ("" for the null answer), NULL when it has none. */
const char *qa_prediction_text(const qa_predictions *p, int i);
/* null_odds.json: {"id": score_diff, ...} as utils_qa.py writes it
 * (json.dumps(indent=4) + "\n", floats as repr of the float32 values);
 * examples without a window are left out. ERR_INPUT for v1 predictions. */
int null_odds_write_json(const char *path, const squad_data *d, const qa_predictions *p);

/* predictions.json: {"id": "answer", ...} in example order, as
 * json.dumps(..., indent=4, ensure_ascii=False) + "\n" writes it (UTF-8 kept;
 * utils_qa.py itself leaves ensure_ascii on, which only \u-escapes the same
 * text). Written atomically. */
int predictions_write_json(const char *path, const squad_data *d, const qa_predictions *p);
/* nbest_predictions.json: {"id": [{"start_logit", "end_logit", "text",
 * "probability"}, ...]} with utils_qa.py's key order and floats as Python's
 * repr of the float32 values. Written atomically. */
int nbest_write_json(const char *path, const squad_data *d, const qa_predictions *p);

#endif
