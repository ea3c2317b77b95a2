/* The official SQuAD 2.0 evaluation (evaluate-v2.0.py), computed as that
 * script computes it, so that `bertc eval --version-2-with-negative` prints
 * the same bytes as `python evaluate-v2.0.py DATA PRED [-n NA_PROB]`.
 *
 * Per question (data file order): has_ans = the answers list is not empty;
 * the gold answers are the answer texts whose normalize_answer (the v1.1
 * one) is not empty, or [""] when none is; exact = normalised strings equal,
 * f1 = the v1.1 bag-of-tokens F1 except that when either side has no tokens
 * it is 1 if both have none, else 0; both the max over the gold answers.
 * A question whose no-answer probability exceeds na_prob_thresh (default
 * 1.0; the probabilities are 0.0 without a file) scores 1 when it has no
 * answer and 0 when it has one. exact/f1 = 100 * sum / count over all
 * questions, then over HasAns and NoAns questions (when there are any);
 * the sums are Python's sum() (of ints and floats, which it adds
 * differently): as Python 3.11 and earlier, plain left-to-right additions,
 * or, with python_312_sum, as 3.12 and later, which compensate the floats'
 * rounding (the f1 can differ in its last digits). With a no-answer file: best_exact / best_f1 and their thresholds,
 * walking the file's questions by increasing probability (a stable sort:
 * equal values keep the file's order), as find_best_thresh does.
 *
 * Where the script stops with an exception (a question without a
 * prediction, or without a no-answer probability; no questions), this
 * fails with ERR_INPUT naming the file and the question id. Ids must be
 * unique in the data file. */
#ifndef BERTC_SQUAD2_EVAL_H
#define BERTC_SQUAD2_EVAL_H

#include "data/squad.h"

#include <stddef.h>

typedef struct {
    double exact, f1;
    int total;
    int has_ans_total, no_ans_total; /* 0: that group is absent from the output */
    double has_ans_exact, has_ans_f1, no_ans_exact, no_ans_f1;
    int have_best;                   /* a no-answer file was given */
    double best_exact, best_f1;
    char best_exact_thresh[40], best_f1_thresh[40]; /* as json.dumps writes the value (int or float) */
} squad2_result;

/* evaluate-v2.0.py DATA PRED [--na-prob-file NA] [--na-prob-thresh T].
 * na_prob_path may be NULL. */
int squad2_eval_files(const char *data_path, const char *pred_path, const char *na_prob_path, double na_prob_thresh,
                      int python_312_sum, squad2_result *out);

/* The same on loaded data: pred[i] answers d->ex[i] (NULL: missing, an
 * error); na_prob[i] its no-answer probability, or na_prob NULL for none
 * (no best_* then). The best_* walk takes the examples in d's order; the
 * sums are Python 3.11's. */
int squad2_eval_examples(const squad_data *d, const char *const *pred, const double *na_prob, double na_prob_thresh,
                         squad2_result *out);

/* indent 1: what the script prints, json.dumps(out_eval, indent=2),
 * without print's newline; indent 0: what its --out-file holds,
 * json.dump(out_eval, f) (one line, no newline). Returns the length; buf
 * needs 1024 bytes. */
int squad2_result_json(const squad2_result *r, int indent, char *buf, size_t cap);

#endif
