/* Evaluation during and at the end of a training run (run.h): predictions
 * on --dev, EM/F1, optionally RUN/predictions.json (and, with
 * --version-2-with-negative, RUN/null_odds.json beside it). */
#include "train/run.h"

#include "core/err.h"
#include "eval/squad2_eval.h"
#include "infer/predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SQuAD 2.0: evaluate-v2.0.py's exact and f1 (no no-answer file, as
 * run_qa.py's squad_v2 metric with no_answer_probability 0) in *r. */
static int eval_v2(const squad_data *d, const qa_predictions *p, eval_result *r)
{
    memset(r, 0, sizeof *r);
    const char **pred = malloc((size_t)(d->n ? d->n : 1) * sizeof *pred);
    if (!pred) return err_set(ERR_RUNTIME, "out of memory");
    for (int i = 0; i < d->n; i++) pred[i] = qa_prediction_text(p, i);
    squad2_result s;
    int rc = squad2_eval_examples(d, pred, NULL, 1.0, &s);
    free(pred);
    if (rc) return rc;
    r->exact_match = s.exact;
    r->f1 = s.f1;
    r->total = s.total;
    return 0;
}

int run_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = run_now();
    qa_predictions p;
    int v2 = c->o->version_2_with_negative;
    int rc = v2 ? qa_model_predict_v2(&c->qm, &c->dev, &c->df, c->o->n_best, c->o->max_answer_length,
                                      c->o->null_score_diff_threshold, &p, c->stop)
                : qa_model_predict(&c->qm, &c->dev, &c->df, c->o->n_best, c->o->max_answer_length, &p, c->stop);
    if (rc) return rc;
    eval_result r;
    rc = v2 ? eval_v2(&c->dev, &p, &r) : qa_predictions_eval(&c->dev, &p, &r);
    if (!rc && pred_path) rc = predictions_write_json(pred_path, &c->dev, &p);
    if (!rc && pred_path && v2) {
        char odds[4096];
        snprintf(odds, sizeof odds, "%s/null_odds.json", c->o->out_dir);
        rc = null_odds_write_json(odds, &c->dev, &p);
    }
    qa_predictions_free(&p);
    if (rc) return rc;
    c->last_em = r.exact_match;
    c->last_f1 = r.f1;
    run_log_eval(c, &r, run_now() - t, print);
    return 0;
}
