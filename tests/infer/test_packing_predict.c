/* Packed prediction (--packing varlen) on SQuAD v1.1 dev windows (T 384,
 * stride 128, bert-base-uncased vocab) with a tiny random model (config
 * "tiny", seed 42): the windows are sorted by length into packed
 * micro-batches and the logits come back in the original order. Checks:
 * the logits at every real position equal the padded path's within 1e-5
 * (of the largest logit); padding positions are -inf; and predictions
 * (postprocess, as predictions.json) are identical to those of the padded
 * path with its padding logits masked to -inf as well. Also counts, without
 * checking, the questions whose answer differs from the plain padded path,
 * whose padding positions (as run_qa.py's) take part in the n-best ranking.
 *
 * make test runs the first 400 questions (40 in the sanitizer build); `test_packing_predict all` (run by
 * scripts/packing_predict.sh) runs all of SQuAD dev. */
#include "backend/backend.h"
#include "core/err.h"
#include "data/features.h"
#include "data/squad.h"
#include "infer/predict.h"
#include "infer/qa_model.h"
#include "model/bert.h"
#include "model/init.h"
#include "testutil.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SUBSET = 400, BATCH = 32 };

static int run_logits(bert_model *bm, int packing, const features *f, float *s, float *e)
{
    qa_model m;
    memset(&m, 0, sizeof m);
    m.model = bm;
    m.T = f->T;
    m.max_B = bert_model_max_batch(bm);
    m.packing = packing;
    return qa_model_logits(&m, f, s, e, NULL);
}

/* The packed logits against the padded ones on every real position (within
 * 1e-5 of the largest), -inf on the packed padding; the padded padding is
 * set to -inf, as the masked padded path gives it. */
static void compare_logits(const features *f, int nq, float *s_pad, float *e_pad, const float *s_pk, const float *e_pk)
{
    size_t n = (size_t)f->n * f->T;
    long real = 0, bad = 0, pad_not_inf = 0;
    double mx = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        if (f->attention_mask[i]) {
            mx = fabs(s_pad[i]) > mx ? fabs(s_pad[i]) : mx;
            mx = fabs(e_pad[i]) > mx ? fabs(e_pad[i]) : mx;
        }
    for (size_t i = 0; i < n; i++) {
        if (!f->attention_mask[i]) {
            pad_not_inf += !(isinf(s_pk[i]) && s_pk[i] < 0 && isinf(e_pk[i]) && e_pk[i] < 0);
            s_pad[i] = e_pad[i] = -INFINITY; /* the masked padded path */
            continue;
        }
        real++;
        double ds = fabs(s_pk[i] - s_pad[i]), de = fabs(e_pk[i] - e_pad[i]);
        double dd = ds > de ? ds : de;
        worst = dd > worst ? dd : worst;
        bad += !(dd <= 1e-5 * mx);
    }
    printf("%d questions, %d windows, %ld real positions of %zu (%.1f%% padding): logits max |diff| %.3e, "
           "largest |logit| %.3f, %ld beyond 1e-5 relative\n",
           nq, f->n, real, n, 100.0 * (double)(n - (size_t)real) / (double)n, worst, mx, bad);
    CHECK(bad == 0, "%ld logits differ beyond 1e-5 of the largest", bad);
    CHECK(pad_not_inf == 0, "%ld padding positions are not -inf", pad_not_inf);
}

int main(int argc, char **argv)
{
    int all = argc > 1 && !strcmp(argv[1], "all");
    squad_data d;
    vocab *v = NULL;
    tokenizer *tok = NULL;
    int rc = squad_load(tu_data("squad-v1.1/dev-v1.1.json"), &d);
    CHECK(rc == 0, "dev: %s", err_msg());
    if (rc) return tu_done();
    rc = vocab_load(tu_data("vocab/bert-base-uncased-vocab.txt"), &v);
    if (!rc) rc = tokenizer_create(&tok, v, 1);
    CHECK(rc == 0, "vocab: %s", err_msg());
    int n_all = d.n;
    /* the sanitizer build is ~20x slower: 40 questions there */
    int subset = tu_sanitized() ? 40 : SUBSET;
    if (!all && d.n > subset) d.n = subset;
    features f;
    feature_opts fo = {.max_seq_length = 384, .doc_stride = 128};
    if (!rc) rc = features_build(&d, tok, &fo, 2, &f);
    CHECK(rc == 0, "features: %s", err_msg());
    if (rc) goto out0;

    bert_config cfg;
    param_table tab;
    config_named("tiny", vocab_size(v), &cfg);
    param_table_init(&tab, &cfg);
    float *p0 = malloc(tab.total * sizeof *p0);
    model_init_random(&cfg, &tab, p0, 42);
    backend be;
    bert_model *pad = NULL, *pk = NULL;
    rc = backend_cpu_create(&be, 2);
    if (!rc) rc = bert_model_create(&pad, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = BATCH, .T = f.T});
    /* packed micro-batches of at most 4096 tokens: many short windows or a few long ones */
    if (!rc)
        rc = bert_model_create(
            &pk, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = BATCH, .T = f.T, .max_tokens = 4096});
    if (!rc) rc = bert_model_set_params(pad, p0);
    if (!rc) rc = bert_model_set_params(pk, p0);
    size_t n = (size_t)f.n * f.T;
    float *s_pad = malloc(n * sizeof(float)), *e_pad = malloc(n * sizeof(float));
    float *s_pk = malloc(n * sizeof(float)), *e_pk = malloc(n * sizeof(float));
    if (!rc) rc = run_logits(pad, 0, &f, s_pad, e_pad);
    if (!rc) rc = run_logits(pk, 1, &f, s_pk, e_pk);
    CHECK(rc == 0, "logits: %s", err_msg());
    if (!rc) {
        compare_logits(&f, d.n, s_pad, e_pad, s_pk, e_pk);

        qa_predictions a = {0}, b = {0};
        postprocess_opts po = {.n_best = PREDICT_N_BEST, .max_answer_length = PREDICT_MAX_ANSWER_LENGTH};
        rc = postprocess_predictions(&d, &f, s_pad, e_pad, &po, &a);
        if (!rc) rc = postprocess_predictions(&d, &f, s_pk, e_pk, &po, &b);
        CHECK(rc == 0, "postprocess: %s", err_msg());
        if (!rc) {
            int differ = 0;
            for (int i = 0; i < d.n; i++) {
                const char *x = a.n_nbest[i] ? a.nbest[i][0].text : "", *y = b.n_nbest[i] ? b.nbest[i][0].text : "";
                if (strcmp(x, y)) {
                    if (differ < 5) fprintf(stderr, "question %s: padded \"%s\", packed \"%s\"\n", d.ex[i].id, x, y);
                    differ++;
                }
            }
            printf("predictions: %d of %d differ between packed and padded with masked padding\n", differ, d.n);
            CHECK(differ == 0, "%d predictions differ", differ);
        }
        qa_predictions_free(&a);
        qa_predictions_free(&b);
        /* the plain padded path, for the record: its padding logits rank too */
        if (!rc) rc = run_logits(pad, 0, &f, s_pad, e_pad);
        if (!rc) rc = postprocess_predictions(&d, &f, s_pad, e_pad, &po, &a);
        if (!rc) rc = postprocess_predictions(&d, &f, s_pk, e_pk, &po, &b);
        if (!rc) {
            int differ = 0;
            for (int i = 0; i < d.n; i++)
                differ += strcmp(a.n_nbest[i] ? a.nbest[i][0].text : "", b.n_nbest[i] ? b.nbest[i][0].text : "") != 0;
            printf("(not checked) %d of %d predictions differ from the plain padded path, whose padding logits "
                   "enter the n-best ranking (random model)\n",
                   differ, d.n);
        }
        qa_predictions_free(&a);
        qa_predictions_free(&b);
    }
    free(s_pad);
    free(e_pad);
    free(s_pk);
    free(e_pk);
    bert_model_free(pad);
    bert_model_free(pk);
    backend_free(&be);
    free(p0);
    param_table_free(&tab);
    features_free(&f);
out0:
    d.n = n_all;
    squad_free(&d);
    tokenizer_free(tok);
    vocab_free(v);
    return tu_done();
}
