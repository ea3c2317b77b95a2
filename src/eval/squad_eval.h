/* The official SQuAD v1.1 evaluation (evaluate-v1.1.py) and CMRC 2018's
 * (cmrc2018_evaluate.py), computed exactly as those scripts compute them, so
 * that `bertc eval` prints the same bytes as `python evaluate-v1.1.py`.
 *
 * SQuAD: normalize_answer = Python 3 str.lower(), drop ASCII punctuation,
 * replace the words a/an/the (re \b, Unicode-aware) with a space, collapse
 * whitespace (str.split()). EM: normalised strings equal. F1: bag-of-tokens
 * overlap (Counter intersection), 0 when nothing is shared. Both the max over
 * the gold answers; the result is 100 * sum / questions, summed in file order.
 * A question without a prediction scores 0 (counted in unanswered).
 *
 * CMRC: see cmrc_eval.c. */
#ifndef BERTC_SQUAD_EVAL_H
#define BERTC_SQUAD_EVAL_H

#include "data/squad.h"

#include <stddef.h>

typedef enum {
    EVAL_METRIC_SQUAD = 0, /* evaluate-v1.1.py */
    EVAL_METRIC_CMRC = 1,  /* cmrc2018_evaluate.py */
} eval_metric;

typedef struct {
    double exact_match; /* percentages, as the scripts compute them */
    double f1;
    int total;          /* questions in the data */
    int unanswered;     /* questions without a prediction (score 0) */
    int no_gold;        /* questions without gold answers (score 0; the scripts crash on them) */
    int impossible;     /* questions marked "is_impossible": true (SQuAD 2.0 data) */
} eval_result;

/* normalize_answer(s): a malloc'ed NUL-terminated string, length in *len. */
char *squad_normalize_answer(const char *s, size_t n, size_t *len);
int squad_exact_match(const char *pred, size_t npred, const char *gold, size_t ngold);
double squad_f1(const char *pred, size_t npred, const char *gold, size_t ngold);

/* cmrc2018_evaluate.py's calc_em_score / calc_f1_score for one gold answer. */
int cmrc_exact_match(const char *pred, size_t npred, const char *gold, size_t ngold);
double cmrc_f1(const char *pred, size_t npred, const char *gold, size_t ngold);

/* EM and F1 of one question: the max over its ngold gold answers (both 0
 * when ngold is 0). gold_len may be NULL for NUL-terminated answers. */
void eval_question(eval_metric m, const char *pred, size_t npred, const char *const *gold, const size_t *gold_len,
                   int ngold, int *em, double *f1);

/* Evaluates a prediction file ({"id": "answer", ...}) against a SQuAD-format
 * data file. Errors (ERR_INPUT) name the file and line:column for bad JSON,
 * or the place in the data / the question id for a wrong structure. Warns
 * (stderr) when the SQuAD metric is asked of a file whose version is not 1.1. */
int eval_files(const char *data_path, const char *pred_path, eval_metric m, eval_result *out);

/* The same on loaded data: pred[i] is the answer to d->ex[i], NULL when none. */
int eval_examples(const squad_data *d, const char *const *pred, eval_metric m, eval_result *out);

/* {"exact_match": E, "f1": F} as json.dumps writes the scripts' dict
 * (floats as repr). Returns the length (without NUL); buf needs 80 bytes. */
int eval_result_json(const eval_result *r, char *buf, size_t cap);

/* Shared with squad2_eval.c: reads a JSON file (ERR_INPUT naming the file
 * and line:column), and checks that predictions are {"id": "string"}. */
typedef struct json_t json_t;
int eval_load_json(const char *path, json_t **out);
int eval_check_predictions(const char *path, json_t *pred);
/* *data = the "data" array of a SQuAD-format document, or ERR_INPUT. */
int eval_data_array(const char *path, json_t *doc, json_t **data);

/* Called by eval_walk_questions for each question: na answers in the file,
 * of which the ng kept are gold[0..ng) (valid only during the call). */
typedef void (*eval_question_fn)(void *user, json_t *qa, const char *id, size_t na, const char **gold,
                                 const size_t *gold_len, int ng);
/* Walks data[].paragraphs[].qas[] in file order, checking the shape
 * (ERR_INPUT naming path; ids printed with precision id_prec, -1 for all of
 * them) and calling fn per question with the answer texts that keep accepts
 * (all when keep is NULL). */
int eval_walk_questions(const char *path, json_t *data, int id_prec, int (*keep)(const char *s, size_t n),
                        eval_question_fn fn, void *user);

#endif
