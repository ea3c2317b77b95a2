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
#include "infer/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The windows split across the ranks (infer_predict_fn). */
static int evaluate_split(void *arg, const postprocess_opts *po, qa_predictions *p)
{
    run_ctx *c = arg;
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
    if (!rc && c->writer) rc = postprocess_predictions(&c->dev, f, logits, logits + n, po, p);
    free(logits);
    return rc;
}

/* Pipeline stages: rank 0 evaluates with the whole model (infer_predict_fn). */
static int evaluate_pipe(void *arg, const postprocess_opts *po, qa_predictions *p)
{
    return run_pipe_predict(arg, po, p);
}

int run_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = clock_now_s();
    const trainer_opts *o = c->o;
    char odds[4096];
    snprintf(odds, sizeof odds, "%s/null_odds.json", o->out_dir);
    infer_params ip = {.model = &c->qm, .data = &c->dev, .f = &c->df,
                       .predict = c->stages > 1 ? evaluate_pipe : c->ranks > 1 ? evaluate_split : NULL,
                       .predict_arg = c,
                       .post = {.n_best = o->n_best, .max_answer_length = o->max_answer_length,
                                .version_2_with_negative = o->version_2_with_negative,
                                .null_score_diff_threshold = o->null_score_diff_threshold},
                       .pred_path = pred_path, .null_odds_path = pred_path && o->version_2_with_negative ? odds : NULL,
                       .score = 1, .stop = c->stop};
    infer_result r = {0};
    int rc;
    /* The evaluation computes as `bertc predict` does: each window's logits
     * independent of the batch it is in (and so of the rank count). */
    backend_set_batch_invariant(&c->qm.be, 1);
    if (c->ranks > 1 && !c->writer) /* a part of the logits; the writer answers */
        rc = ip.predict(c, &ip.post, &r.pred);
    else
        rc = infer_run(&ip, &r);
    backend_set_batch_invariant(&c->qm.be, 0);
    if (!rc && (c->ranks == 1 || c->writer)) run_log_eval(c, &r.score, clock_now_s() - t, print);
    infer_result_free(&r);
    return rc;
}
