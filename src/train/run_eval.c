/* Evaluation during and at the end of a training run (run.h): predictions
 * on --dev, EM/F1, optionally RUN/predictions.json. */
#include "train/run.h"

#include "infer/predict.h"

int run_evaluate(run_ctx *c, const char *pred_path, int print)
{
    double t = run_now();
    qa_predictions p;
    int rc = qa_model_predict(&c->qm, &c->dev, &c->df, c->o->n_best, c->o->max_answer_length, &p, c->stop);
    if (rc) return rc;
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
