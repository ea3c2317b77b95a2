/* Evaluation during and at the end of a training run (run.h): predictions
 * on --dev, EM/F1, optionally RUN/predictions.json (and, with
 * --version-2-with-negative, RUN/null_odds.json beside it). With N ranks
 * the windows are split in N contiguous parts, each rank computes the
 * logits of its part, the parts are gathered (an all-reduce of arrays that
 * are zero outside each rank's part: adding zeros is exact) and rank 0
 * turns them into predictions, scores and writes them. */
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "dist/dist.h"
#include "eval/squad2_eval.h"
#include "infer/predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static postprocess_opts eval_postprocess_opts(const trainer_opts *o)
{
    return (postprocess_opts){.n_best = o->n_best, .max_answer_length = o->max_answer_length,
                              .version_2_with_negative = o->version_2_with_negative,
                              .null_score_diff_threshold = o->null_score_diff_threshold};
}

static int evaluate_split(run_ctx *c, qa_predictions *p)
{
    const features *f = &c->df;
    size_t n = (size_t)f->n * (size_t)f->T;
    memset(p, 0, sizeof *p);
    float *logits = calloc(2 * n + 1, sizeof *logits);
    int rc = logits ? 0 : err_set(ERR_RUNTIME, "out of memory for the logits of %d windows", f->n);
    int lo = (int)((int64_t)f->n * c->rank / c->ranks), hi = (int)((int64_t)f->n * (c->rank + 1) / c->ranks);
    if (!rc) {
        features part = *f;
        size_t off = (size_t)lo * (size_t)f->T;
        part.n = hi - lo;
        part.input_ids += off;
        part.token_type_ids += off;
        part.attention_mask += off;
        /* No stop check inside: the ranks agree on signals between steps. */
        rc = qa_model_logits(&c->qm, &part, logits + off, logits + n + off, NULL);
    }
    rc = dist_agree(rc);
    if (!rc) rc = dist_allreduce_sum_fixed(logits, 2 * n);
    postprocess_opts po = eval_postprocess_opts(c->o);
    if (!rc && c->writer) rc = postprocess_predictions(&c->dev, f, logits, logits + n, &po, p);
    free(logits);
    return rc;
}

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
    double t = clock_now_s();
    qa_predictions p;
    int v2 = c->o->version_2_with_negative;
    int rc;
    /* The evaluation computes as `bertc predict` does: each window's logits
     * independent of the batch it is in (and so of the rank count). */
    backend_set_batch_invariant(&c->qm.be, 1);
    postprocess_opts po = eval_postprocess_opts(c->o);
    if (c->stages > 1)
        rc = run_pipe_predict(c, &po, &p);
    else if (c->ranks > 1)
        rc = evaluate_split(c, &p);
    else
        rc = qa_model_predict(&c->qm, &c->dev, &c->df, &po, &p, c->stop);
    backend_set_batch_invariant(&c->qm.be, 0);
    if (rc || (c->ranks > 1 && !c->writer)) return rc;
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
    run_log_eval(c, &r, clock_now_s() - t, print);
    return 0;
}
