/* One inference run (infer.h). */
#include "infer/infer.h"

#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "eval/squad2_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a run opened itself (freed at its end), and what it runs on. */
typedef struct {
    qa_model model;
    squad_data data;
    features f;
    int have_model, have_data, have_f;
    float *start, *end; /* the logits it computed */
    qa_model *m;
    const squad_data *d;
    const features *fp;
} infer_state;

/* model_dir: loaded, and its backend chosen before any data is read, so
 * that a --device the machine cannot honour fails first. */
static int open_model(const infer_params *p, infer_state *s)
{
    s->m = p->model; /* NULL when the logits or the answers are given */
    if (!p->model_dir) return 0;
    int rc = qa_model_load(&s->model, p->model_dir, 42);
    if (rc) return rc;
    s->have_model = 1;
    s->m = &s->model;
    if ((rc = qa_model_select(s->m, p->bo))) return rc;
    if (s->m->qa_initialised) log_warn("%s has no qa_outputs: answers come from a random QA head", p->model_dir);
    return 0;
}

/* The questions and their windows; a model opened here starts once their
 * count is known (no more rows per forward than windows). */
static int open_questions(const infer_params *p, infer_state *s)
{
    int rc;
    s->d = p->data;
    if (!s->d) {
        if ((rc = squad_load(p->data_path, &s->data))) return rc;
        s->have_data = 1;
        s->d = &s->data;
    }
    int T = p->T, stride = p->stride;
    s->fp = p->f;
    if (!s->fp) {
        qa_model_fit_window(s->m, &T, p->T_given, &stride, p->stride_given);
        feature_opts fo = {T, stride, p->max_query_length, p->post.version_2_with_negative};
        if ((rc = features_build(s->d, s->m->tok, &fo, p->threads, &s->f))) return rc;
        s->have_f = 1;
        s->fp = &s->f;
    }
    if (!s->have_model) return 0;
    int n = s->fp->n;
    s->m->packing = p->packing;
    s->m->max_tokens = p->max_tokens ? p->max_tokens : QA_MAX_TOKENS_AUTO;
    return qa_model_start(s->m, p->bo, n < p->batch ? (n > 0 ? n : 1) : p->batch, s->fp->T);
}

static int dump_logits(const char *dir, const features *f, const float *start, const float *end)
{
    int rc = mkdir_p(dir);
    if (rc) return rc;
    int64_t shape[2] = {f->n, f->T};
    char path[4096];
    rc = npy_write_f32(path_join(path, sizeof path, dir, "start_logits.npy"), start, 2, shape);
    if (!rc) rc = npy_write_f32(path_join(path, sizeof path, dir, "end_logits.npy"), end, 2, shape);
    return rc;
}

/* SQuAD v1.1's EM/F1, or evaluate-v2.0.py's exact and f1 (no no-answer
 * file, as run_qa.py's squad_v2 metric with no_answer_probability 0). */
static int score(const squad_data *d, const qa_predictions *p, int v2, eval_result *r)
{
    const char **pred = malloc((size_t)(d->n ? d->n : 1) * sizeof *pred);
    if (!pred) return err_set(ERR_RUNTIME, "out of memory");
    for (int i = 0; i < d->n; i++) pred[i] = qa_prediction_text(p, i);
    squad2_result s;
    int rc = v2 ? squad2_eval_examples(d, pred, NULL, 1.0, &s) : eval_examples(d, pred, EVAL_METRIC_SQUAD, r);
    free(pred);
    if (!rc && v2) {
        r->exact_match = s.exact;
        r->f1 = s.f1;
        r->total = s.total;
    }
    return rc;
}

/* The logits the run was not given: the hook's, or the model's. */
static int logits(const infer_params *p, infer_state *s)
{
    if (!p->logits) return qa_model_logits_alloc(s->m, s->fp, &s->start, &s->end, p->stop);
    size_t n = (size_t)s->fp->n * (size_t)s->fp->T;
    s->start = malloc((n ? n : 1) * sizeof *s->start);
    s->end = malloc((n ? n : 1) * sizeof *s->end);
    if (!s->start || !s->end) return err_set(ERR_RUNTIME, "out of memory for the logits of %d windows", s->fp->n);
    return p->logits(p->logits_arg, s->fp, s->start, s->end);
}

/* The answers from the logits, scored and written. */
static int answer(const infer_params *p, infer_state *s, infer_result *r)
{
    const float *start = p->start_logits, *end = p->end_logits;
    int rc = 0;
    if (!start) {
        rc = logits(p, s);
        start = s->start;
        end = s->end;
    }
    if (!rc && p->dump_dir) rc = dump_logits(p->dump_dir, s->fp, start, end);
    if (rc) return rc;
    rc = postprocess_predictions(s->d, s->fp, start, end, &p->post, &r->pred);
    if (!rc && p->score) rc = score(s->d, &r->pred, p->post.version_2_with_negative, &r->score);
    if (!rc && p->pred_path) rc = predictions_write_json(p->pred_path, s->d, &r->pred);
    if (!rc && p->nbest_path) rc = nbest_write_json(p->nbest_path, s->d, &r->pred);
    if (!rc && p->null_odds_path) rc = null_odds_write_json(p->null_odds_path, s->d, &r->pred);
    return rc;
}

int infer_run(const infer_params *p, infer_result *r)
{
    double t0 = clock_now_s();
    memset(r, 0, sizeof *r);
    infer_state s = {0};
    int rc = open_model(p, &s);
    if (!rc) rc = open_questions(p, &s);
    if (!rc) {
        r->questions = s.d->n;
        r->windows = s.fp->n;
        rc = answer(p, &s, r);
    }
    if (!rc && p->name)
        fprintf(stderr, "%s: %d questions, %d windows, %.1fs, %s -> %s\n", p->name, r->questions, r->windows,
                clock_now_s() - t0, s.m ? select_precision_name(s.m->info.precision) : "fp32", p->pred_path);
    free(s.start);
    free(s.end);
    if (s.have_f) features_free(&s.f);
    if (s.have_data) squad_free(&s.data);
    if (s.have_model) qa_model_free(&s.model);
    return rc;
}

void infer_result_free(infer_result *r)
{
    qa_predictions_free(&r->pred);
    memset(r, 0, sizeof *r);
}
