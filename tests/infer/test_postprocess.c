/* Answer post-processing (src/infer/predict.c) against utils_qa.py's
 * postprocess_qa_predictions run by tools/postprocess_ref.py on 212 SQuAD dev
 * questions, with T=384/stride 128 and T=128/stride 32 windows and random
 * logits with ties and rows that leave no valid span
 * (tests/ref/postprocess/squad_T*.bin). The features come from the
 * reference file and the contexts from the SQuAD file, so this test depends
 * on neither the tokenizer nor features.c.
 *
 * Requires: the same prediction text for every example, the same n-best
 * texts in the same order, scores and probabilities within 1e-6, and
 * predictions.json byte-identical to Python's json.dumps output. */
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
    if (ppref_read(&ref, name, 0, contexts, "SQuAD dev")) return;
    qa_predictions p;
    int rc = ppref_predict(&ref, &(postprocess_opts){0}, &p);
    CHECK(rc == 0, "postprocess: %s", err_msg());
    ppref_reader *r = &ref.r;
    squad_data *d = &ref.d;
    int ne = ref.ne;
    int text_bad = 0, n_empty = 0;
    ppref_nbest_diff nd = {0};
    for (int i = 0; rc == 0 && i < ne && !r->bad; i++) {
        char *want = rd_str(r);
        const char *got = p.n_nbest[i] > 0 ? p.nbest[i][0].text : "(none)";
        n_empty += strcmp(want, "empty") == 0;
        if (strcmp(got, want) != 0 && text_bad++ < 5)
            fprintf(stderr, "%s example %d (%s): got '%s' want '%s'\n", name, i, d->ex[i].id, got, want);
        ppref_compare_nbest(r, name, &p, i, &nd);
        free(want);
    }
    uint64_t want_pred_hash = rd_u64(r), want_nbest_hash = rd_u64(r);
    CHECK(!r->bad && r->p == r->end, "%s: layout", name);
    printf("%s: %d examples, %d features, T=%d: %d prediction texts differ, %d n-best counts differ, "
           "%d of %d n-best entries differ in text/order/logits; max |score diff| %.2e, max |prob diff| %.2e; %d \"empty\"\n",
           name, ne, ref.nf, ref.T, text_bad, nd.nbest_bad, nd.order_bad, nd.n_answers, nd.max_score, nd.max_prob, n_empty);
    CHECK(text_bad == 0 && nd.nbest_bad == 0 && nd.order_bad == 0, "%s: predictions differ from utils_qa.py", name);
    CHECK(nd.max_score <= 1e-6 && nd.max_prob <= 1e-6, "%s: scores %.3g probabilities %.3g beyond 1e-6", name,
          nd.max_score, nd.max_prob);
    CHECK(n_empty > 0 && nd.n_answers > 1000, "%s: the reference exercises 'empty' (%d) and many n-best entries (%d)",
          name, n_empty, nd.n_answers);

    /* the files, as utils_qa.py would write them with ensure_ascii=False */
    char out[512];
    snprintf(out, sizeof out, "%s/%s.predictions.json", tu_tmpdir(), name);
    CHECK(predictions_write_json(out, d, &p) == 0, "write %s: %s", out, err_msg());
    size_t jn;
    uint64_t h = ppref_file_hash(out, &jn);
    printf("%s: predictions.json %zu bytes, %s Python's\n", name, jn, h == want_pred_hash ? "identical to" : "DIFFERENT from");
    CHECK(h == want_pred_hash, "%s: predictions.json bytes differ from json.dumps(indent=4, ensure_ascii=False)", name);
    snprintf(out, sizeof out, "%s/%s.nbest.json", tu_tmpdir(), name);
    CHECK(nbest_write_json(out, d, &p) == 0, "write %s: %s", out, err_msg());
    json_error_t je;
    json_t *nj = json_load_file(out, 0, &je);
    CHECK(nj && json_is_array(json_object_get(nj, d->ex[0].id)) && (int)json_object_size(nj) == ne,
          "%s: nbest file does not parse back: %d:%d %s", out, je.line, je.column, je.text);
    if (nj) {
        const char *t = json_string_value(json_object_get(json_array_get(json_object_get(nj, d->ex[0].id), 0), "text"));
        CHECK(t && strcmp(t, p.nbest[0][0].text) == 0, "nbest file: first text");
    }
    json_decref(nj);
    /* numpy's float32 exp may differ from expf in the last bit, so this is reported, not required */
    h = ppref_file_hash(out, &jn);
    printf("%s: nbest_predictions.json %zu bytes, %s Python's (informational)\n", name, jn,
           h == want_nbest_hash ? "identical to" : "differs from");
    qa_predictions_free(&p);
    ppref_free(&ref);
}

/* Small cases worked out by hand. */
static void test_hand(void)
{
    ppref_hand h;
    ppref_hand_init(&h, "y\"\n\x01");
    /* one window of T=6: [CLS] ab cd é [SEP] pad */
    enum { T = 6 };
    int32_t ob[2 * T] = {-1, 0, 3, 6, -1, -1, -1, 0, 3, 6, -1, -1}, oe[2 * T] = {-1, 2, 5, 7, -1, -1, -1, 2, 5, 7, -1, -1};
    int32_t exi[2] = {0, 1};
    features f = {.n = 2, .T = T, .example = exi, .offset_begin = ob, .offset_end = oe};
    /* x: ties: all zero -> top 2 starts and ends are the two highest indexes
     * (5, 4: not context) -> "empty". y: start 1 and 3 tie at 2.0, end 3 best. */
    float sl[2 * T] = {0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 0};
    float el[2 * T] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0.5f};
    qa_predictions p;
    int rc = postprocess_predictions(&h.d, &f, sl, el, &(postprocess_opts){.n_best = 2, .max_answer_length = 30}, &p);
    CHECK(rc == 0 && p.n_nbest[0] == 1 && strcmp(p.nbest[0][0].text, "empty") == 0 && p.nbest[0][0].probability == 1.0,
          "all-tied window: '%s' (%d)", rc ? "" : p.nbest[0][0].text, rc ? -1 : p.n_nbest[0]);
    /* y: starts [3 (tie, higher index first), 1], ends [3, 5]; valid: (3,3) "é" 3.0,
     * (1,3) "ab cd é" 3.0 -- equal scores keep insertion order: (3,3) first */
    CHECK(rc == 0 && p.n_nbest[1] == 2 && strcmp(p.nbest[1][0].text, "é") == 0 && strcmp(p.nbest[1][1].text, "ab cd é") == 0 &&
              p.nbest[1][0].probability == 0.5,
          "ties: '%s' '%s'", rc ? "" : p.nbest[1][0].text, rc || p.n_nbest[1] < 2 ? "" : p.nbest[1][1].text);
    ppref_check_written(predictions_write_json, "hand.json", "predictions.json", &h.d, &p,
                        "{\n    \"x\": \"empty\",\n    \"y\\\"\\n\\u0001\": \"é\"\n}\n");
    const char *want =
        "{\n    \"x\": [\n        {\n            \"text\": \"empty\",\n            \"start_logit\": 0.0,\n"
        "            \"end_logit\": 0.0,\n            \"probability\": 1.0\n        }\n    ],\n"
        "    \"y\\\"\\n\\u0001\": [\n        {\n            \"start_logit\": 2.0,\n            \"end_logit\": 1.0,\n"
        "            \"text\": \"é\",\n            \"probability\": 0.5\n        },\n        {\n"
        "            \"start_logit\": 2.0,\n            \"end_logit\": 1.0,\n            \"text\": \"ab cd é\",\n"
        "            \"probability\": 0.5\n        }\n    ]\n}\n";
    ppref_check_written(nbest_write_json, "hand_nbest.json", "nbest_predictions.json", &h.d, &p, want);
    qa_predictions_free(&p);

    /* only one valid span and its text is empty: "empty" goes first, and the
     * softmax is over [0.0, score] in float64 */
    int32_t ob1[T] = {-1, 2, -1, -1, -1, -1}, oe1[T] = {-1, 2, -1, -1, -1, -1};
    float s1[T] = {0, 1, 0, 0, 0, 0}, e1[T] = {0, 1, 0, 0, 0, 0};
    features f1 = {.n = 1, .T = T, .example = exi, .offset_begin = ob1, .offset_end = oe1};
    h.d.n = 1;
    rc = postprocess_predictions(&h.d, &f1, s1, e1, &(postprocess_opts){.n_best = 20, .max_answer_length = 30}, &p);
    double want_p = exp(-2.0) / (exp(-2.0) + 1.0);
    CHECK(rc == 0 && p.n_nbest[0] == 2 && strcmp(p.nbest[0][0].text, "empty") == 0 && p.nbest[0][1].text[0] == 0 &&
              p.nbest[0][0].probability == want_p,
          "single empty span: n %d prob %.17g want %.17g", rc ? -1 : p.n_nbest[0], rc ? 0 : p.nbest[0][0].probability, want_p);
    if (rc == 0) qa_predictions_free(&p);

    /* max_answer_length 2: (1,3) is 3 tokens long, only "é" is left for y */
    h.d.n = 2;
    rc = postprocess_predictions(&h.d, &f, sl, el, &(postprocess_opts){.n_best = 2, .max_answer_length = 2}, &p);
    CHECK(rc == 0 && p.n_nbest[1] == 1 && strcmp(p.nbest[1][0].text, "é") == 0, "max_answer_length 2: '%s' (%d)",
          rc ? "" : p.nbest[1][0].text, rc ? -1 : p.n_nbest[1]);
    if (rc == 0) qa_predictions_free(&p);

    /* bad input */
    sl[3] = NAN;
    rc = postprocess_predictions(&h.d, &f, sl, el, &(postprocess_opts){.n_best = 20, .max_answer_length = 30}, &p);
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "NaN") != NULL, "NaN: %d %s", rc, err_msg());
    sl[3] = 0;
    exi[1] = 7;
    rc = postprocess_predictions(&h.d, &f, sl, el, &(postprocess_opts){.n_best = 20, .max_answer_length = 30}, &p);
    CHECK(rc == ERR_INPUT, "example index out of range: %d %s", rc, err_msg());
    free(h.c.text);
    free(h.c.cp_byte);
}

int main(void)
{
    test_hand();
    /* id -> context of every SQuAD dev question */
    json_t *ctx = ppref_contexts(tu_data("squad-v1.1/dev-v1.1.json"));
    check_reference("squad_T384.bin", ctx);
    check_reference("squad_T128.bin", ctx);
    json_decref(ctx);
    return tu_done();
}
