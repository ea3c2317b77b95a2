/* SQuAD 2.0 post-processing (src/infer/predict.c, postprocess_predictions with version_2_with_negative)
 * against utils_qa.py's postprocess_qa_predictions with
 * version_2_with_negative=True, run by tools/postprocess_v2_ref.py on 112
 * questions of SQuAD dev made v2 (tests/data/squad2_dev_slice.json), T=128
 * stride 32, random logits with ties, rows without a valid span, [CLS]
 * logits raised or lowered (the null answer wins, or falls out of the n best
 * and is added back), and a score difference of exactly float32(0.1) against
 * the threshold 0.1 (tests/ref/postprocess/squad2_T128.bin). Features come
 * from the reference file and contexts from the slice, so neither the
 * tokenizer nor features.c is involved.
 *
 * Requires: the same prediction for every example at 4 thresholds
 * (predictions.json byte-identical to json.dumps(indent=4,
 * ensure_ascii=False)), the same null odds (null_odds.json byte-identical),
 * the same n-best texts in the same order with the same logits, scores and
 * probabilities within 1e-6; plus hand cases. */
#include "testutil.h"

#include "core/err.h"
#include "core/fileio.h"
#include "infer/predict.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "postprocess_ref.h"

static void check_reference(const char *name, json_t *contexts)
{
    ppref ref;
    if (ppref_read(&ref, name, 1, contexts, "the v2 slice")) return;
    const double *thr = ref.thr;
    postprocess_opts po = {.version_2_with_negative = 1, .null_score_diff_threshold = thr[0]};
    qa_predictions p;
    int rc = ppref_predict(&ref, &po, &p);
    CHECK(rc == 0, "postprocess: %s", err_msg());
    ppref_reader *r = &ref.r;
    squad_data *d = &ref.d;
    int ne = ref.ne, nt = ref.nt;
    int text_bad = 0, diff_bad = 0, n_null = 0;
    ppref_nbest_diff nd = {0};
    for (int i = 0; rc == 0 && i < ne && !r->bad; i++) {
        char *want = rd_str(r);
        double want_diff = rd_f64(r);
        const char *got = qa_prediction_text(&p, i);
        if (!got) got = "(none)";
        n_null += want[0] == 0;
        if (strcmp(got, want) != 0 && text_bad++ < 5)
            fprintf(stderr, "%s example %d (%s): got '%s' want '%s'\n", name, i, d->ex[i].id, got, want);
        if ((double)p.score_diff[i] != want_diff && diff_bad++ < 5)
            fprintf(stderr, "%s example %d: score_diff %.9g want %.9g\n", name, i, (double)p.score_diff[i], want_diff);
        ppref_compare_nbest(r, name, &p, i, &nd);
        free(want);
    }
    uint64_t want_pred[8];
    for (int i = 0; i < nt; i++) want_pred[i] = rd_u64(r);
    uint64_t want_nbest = rd_u64(r), want_odds = rd_u64(r);
    CHECK(!r->bad && r->p == r->end, "%s: layout", name);
    printf("%s: %d examples, %d features, T=%d: %d predictions differ, %d null odds differ, %d n-best counts differ, "
           "%d of %d n-best entries differ in text/order/logits; max |score diff| %.2e, max |prob diff| %.2e; "
           "%d null predictions, %d null entries in n-best lists\n",
           name, ne, ref.nf, ref.T, text_bad, diff_bad, nd.nbest_bad, nd.order_bad, nd.n_answers, nd.max_score, nd.max_prob,
           n_null, nd.n_null_entries);
    CHECK(text_bad == 0 && diff_bad == 0 && nd.nbest_bad == 0 && nd.order_bad == 0,
          "%s: predictions differ from utils_qa.py", name);
    CHECK(nd.max_score <= 1e-6 && nd.max_prob <= 1e-6, "%s: scores %.3g probabilities %.3g beyond 1e-6", name,
          nd.max_score, nd.max_prob);
    CHECK(n_null > 0 && n_null < ne && nd.n_null_entries == ne, "%s: the reference exercises the null answer (%d, %d)",
          name, n_null, nd.n_null_entries);

    char out[512];
    size_t jn = 0;
    snprintf(out, sizeof out, "%s/%s.null_odds.json", tu_tmpdir(), name);
    CHECK(null_odds_write_json(out, d, &p) == 0, "write %s: %s", out, err_msg());
    uint64_t h = ppref_file_hash(out, &jn);
    printf("%s: null_odds.json %zu bytes, %s Python's\n", name, jn, h == want_odds ? "identical to" : "DIFFERENT from");
    CHECK(h == want_odds, "%s: null_odds.json bytes differ", name);
    snprintf(out, sizeof out, "%s/%s.nbest.json", tu_tmpdir(), name);
    CHECK(nbest_write_json(out, d, &p) == 0, "write %s: %s", out, err_msg());
    h = ppref_file_hash(out, &jn);
    printf("%s: nbest_predictions.json %zu bytes, %s Python's (informational: numpy's float32 exp)\n", name, jn,
           h == want_nbest ? "identical to" : "differs from");
    qa_predictions_free(&p);
    for (int t = 0; t < nt; t++) {
        po.null_score_diff_threshold = thr[t];
        rc = ppref_predict(&ref, &po, &p);
        CHECK(rc == 0, "postprocess at %g: %s", thr[t], err_msg());
        if (rc) continue;
        int nn = 0;
        for (int i = 0; i < ne; i++) nn += qa_prediction_text(&p, i)[0] == 0;
        snprintf(out, sizeof out, "%s/%s.pred%d.json", tu_tmpdir(), name, t);
        CHECK(predictions_write_json(out, d, &p) == 0, "write %s: %s", out, err_msg());
        h = ppref_file_hash(out, &jn);
        printf("%s: threshold %g: %d null answers, predictions.json %zu bytes, %s Python's\n", name, thr[t], nn, jn,
               h == want_pred[t] ? "identical to" : "DIFFERENT from");
        CHECK(h == want_pred[t], "%s: predictions.json at threshold %g differs", name, thr[t]);
        qa_predictions_free(&p);
    }
    ppref_free(&ref);
}

/* Hand cases: one window of T=6, [CLS] ab cd é [SEP] pad. */
static void test_hand(void)
{
    enum { T = 6 };
    ppref_hand h;
    ppref_hand_init(&h, "y");
    int32_t ob[3 * T] = {-1, 0, 3, 6, -1, -1, -1, 0, 3, 6, -1, -1, -1, 0, 3, 6, -1, -1};
    int32_t oe[3 * T] = {-1, 2, 5, 7, -1, -1, -1, 2, 5, 7, -1, -1, -1, 2, 5, 7, -1, -1};
    int32_t exi[3] = {0, 1, 1};
    features f = {.n = 3, .T = T, .example = exi, .offset_begin = ob, .offset_end = oe};
    /* x: span "cd" (2,2) scores 3, null 1 + 1 = 2: diff -1 -> "cd" at 0, "" at -1.5.
     * y: two windows, null scores 4 and 3: the minimum (3, window 2) counts; best span
     * "ab" (1,1) 1 + 1 = 2 in window 1: diff 1 -> "" at 0, "ab" at 1 (not above). */
    float sl[3 * T] = {1, -9, 2, -9, -9, -9, 2, 1, -9, -9, -9, -9, 1.5f, -9, -9, -9, -9, -9};
    float el[3 * T] = {1, -9, 1, -9, -9, -9, 2, 1, -9, -9, -9, -9, 1.5f, -9, -9, -9, -9, -9};
    qa_predictions p;
    postprocess_opts po = {.n_best = 2, .max_answer_length = 30, .version_2_with_negative = 1};
    int rc = postprocess_predictions(&h.d, &f, sl, el, &po, &p);
    CHECK(rc == 0, "hand: %s", err_msg());
    if (rc) return;
    CHECK(!strcmp(qa_prediction_text(&p, 0), "cd") && p.score_diff[0] == -1.0f, "x: '%s' diff %g", qa_prediction_text(&p, 0),
          p.score_diff[0]);
    CHECK(!strcmp(qa_prediction_text(&p, 1), "") && p.score_diff[1] == 1.0f, "y: '%s' diff %g", qa_prediction_text(&p, 1),
          p.score_diff[1]);
    /* y's n-best (n_best 2): "ab" (2), then the null (3) sorts first: ["", "ab"], or the null first */
    CHECK(p.n_nbest[1] >= 2 && p.nbest[1][0].text[0] == 0 && p.nbest[1][0].start_logit == 1.5f && !strcmp(p.nbest[1][1].text, "ab"),
          "y n-best: '%s' (%g) '%s'", p.nbest[1][0].text, p.nbest[1][0].start_logit, p.n_nbest[1] > 1 ? p.nbest[1][1].text : "");
    ppref_check_written(null_odds_write_json, "hand_odds.json", "null_odds.json", &h.d, &p,
                        "{\n    \"x\": -1.0,\n    \"y\": 1.0\n}\n");
    ppref_check_written(predictions_write_json, "hand_pred.json", "predictions.json", &h.d, &p,
                        "{\n    \"x\": \"cd\",\n    \"y\": \"\"\n}\n");
    qa_predictions_free(&p);
    po.null_score_diff_threshold = 1.0;
    rc = postprocess_predictions(&h.d, &f, sl, el, &po, &p);
    CHECK(rc == 0 && !strcmp(qa_prediction_text(&p, 1), "ab"), "y at threshold 1: '%s'", rc ? "" : qa_prediction_text(&p, 1));
    if (!rc) qa_predictions_free(&p);
    po.null_score_diff_threshold = -1.5;
    rc = postprocess_predictions(&h.d, &f, sl, el, &po, &p);
    CHECK(rc == 0 && !strcmp(qa_prediction_text(&p, 0), ""), "x at threshold -1.5: '%s'", rc ? "" : qa_prediction_text(&p, 0));
    if (!rc) qa_predictions_free(&p);
    /* the null answer alone (no valid span): "empty" first, compared at logits 0 */
    float s1[T] = {0.5f, -9, -9, 9, 9, 9}, e1[T] = {0.25f, -9, -9, -9, 9, 9};
    features f1 = {.n = 1, .T = T, .example = exi, .offset_begin = ob, .offset_end = oe};
    h.d.n = 1;
    po.null_score_diff_threshold = 0.0;
    rc = postprocess_predictions(&h.d, &f1, s1, e1, &po, &p);
    CHECK(rc == 0 && p.n_nbest[0] == 2 && !strcmp(p.nbest[0][0].text, "empty") && p.nbest[0][1].text[0] == 0 &&
              p.score_diff[0] == 0.75f && !strcmp(qa_prediction_text(&p, 0), ""),
          "null only: n %d '%s' diff %g", rc ? -1 : p.n_nbest[0], rc ? "" : p.nbest[0][0].text, rc ? 0 : p.score_diff[0]);
    if (!rc) qa_predictions_free(&p);
    /* v1 predictions have no null odds */
    po.version_2_with_negative = 0;
    rc = postprocess_predictions(&h.d, &f1, s1, e1, &po, &p);
    char path[512];
    snprintf(path, sizeof path, "%s/hand_pred.json", tu_tmpdir());
    CHECK(rc == 0 && null_odds_write_json(path, &h.d, &p) == ERR_INPUT, "null odds of v1 predictions");
    if (!rc) qa_predictions_free(&p);
    free(h.c.text);
    free(h.c.cp_byte);
}

int main(void)
{
    test_hand();
    json_t *ctx = ppref_contexts("tests/data/squad2_dev_slice.json");
    check_reference("squad2_T128.bin", ctx);
    json_decref(ctx);
    return tu_done();
}
