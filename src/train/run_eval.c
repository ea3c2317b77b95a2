/* Evaluation during and at the end of a training run (run.h): predictions
 * on --dev, EM/F1, optionally RUN/predictions.json. With N ranks the
 * windows are split in N contiguous parts, each rank computes the logits of
 * its part, the parts are gathered (an all-reduce of arrays that are zero
 * outside each rank's part: adding zeros is exact) and rank 0 turns them
 * into predictions, scores and writes them. */
#include "train/run.h"

#include "core/err.h"
#include "dist/dist.h"
#include "infer/predict.h"

#include <stdlib.h>
#include <string.h>

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
    if (!rc && c->writer)
        rc = postprocess_predictions(&c->dev, f, logits, logits + n, c->o->n_best, c->o->max_answer_length, p);
    free(logits);
    return rc;
}

int run_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = run_now();
    qa_predictions p;
    int rc;
    if (c->ranks > 1) {
        rc = evaluate_split(c, &p);
        if (rc || !c->writer) return rc;
    } else {
        rc = qa_model_predict(&c->qm, &c->dev, &c->df, c->o->n_best, c->o->max_answer_length, &p, c->stop);
        if (rc) return rc;
    }
    eval_result r;
    rc = qa_predictions_eval(&c->dev, &p, &r);
    if (!rc && pred_path) rc = predictions_write_json(pred_path, &c->dev, &p);
    qa_predictions_free(&p);
    if (rc) return rc;
    c->last_em = r.exact_match;
    c->last_f1 = r.f1;
    run_log_eval(c, &r, run_now() - t, print);
    return 0;
}
