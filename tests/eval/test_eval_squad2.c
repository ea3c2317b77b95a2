/* The official SQuAD 2.0 metric (src/eval/squad2_eval.c) against the output
 * of evaluate-v2.0.py (tools/squad2_eval_ref.py, committed as
 * tests/data/squad2_*expected.json):
 * - hand-made questions (tests/data/squad2_hand_*): answerable and not, golds
 *   that normalise to nothing, int and float no-answer values, an id that
 *   is not a question, four option sets;
 * - the whole SQuAD dev set made v2 (question k % 3 == 1 loses its answers),
 *   with the v1 test's perturbed predictions (some swapped to "") and
 *   no-answer values with ties and values above 1.0, written here by the same
 *   rules as the Python script: the printed JSON byte for byte;
 * - the same with Python 3.12's sum() (compensated; ported step by step in
 *   tools/squad2_eval_ref.py, as this machine's Python is 3.11), which
 *   changes the last digits of f1 here;
 * - squad2_eval_examples on the loaded data gives the same numbers;
 * - where the script fails (a question without a prediction or without a
 *   no-answer value), or the file is bad, ERR_INPUT names the id. */
#include "testutil.h"

#include "core/err.h"
#include "eval/squad2_eval.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int use_na;
    double thresh;
    int py312;
} eval_case;

static const eval_case CASES[] = {{"plain", 0, 1.0, 0},        {"na", 1, 1.0, 0},
                                  {"na_t0.5", 1, 0.5, 0},      {"t-1", 0, -1.0, 0},
                                  {"plain py3.12", 0, 1.0, 1}, {"na_t0.5 py3.12", 1, 0.5, 1}};

static void run_cases(const char *what, const char *data, const char *pred, const char *na, json_t *expected)
{
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        squad2_result r;
        int rc = squad2_eval_files(data, pred, CASES[c].use_na ? na : NULL, CASES[c].thresh, CASES[c].py312, &r);
        CHECK(rc == 0, "%s %s: %s", what, CASES[c].name, err_msg());
        if (rc) continue;
        for (int indent = 1; indent >= 0; indent--) {
            char out[1024], key[64];
            squad2_result_json(&r, indent, out, sizeof out);
            snprintf(key, sizeof key, "%s%s", CASES[c].name, indent ? "" : " --out-file");
            const char *want = json_string_value(json_object_get(expected, key));
            CHECK(want && !strcmp(out, want), "%s %s:\n got %s\nwant %s", what, key, out, want ? want : "(none)");
            if (want && !strcmp(out, want))
                printf("%s %s: identical to evaluate-v2.0.py%s (%zu bytes)\n", what, key,
                       CASES[c].py312 ? " with Python 3.12's sum() (tools/squad2_eval_ref.py's port)" : "", strlen(out));
        }
    }
}

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK(j != NULL, "cannot load %s: %d:%d: %s", path, e.line, e.column, e.text);
    return j;
}

static void test_hand(void)
{
    json_t *exp = load("tests/data/squad2_hand_expected.json");
    if (!exp) return;
    run_cases("hand", "tests/data/squad2_hand_data.json", "tests/data/squad2_hand_pred.json", "tests/data/squad2_hand_na.json",
              exp);
    json_decref(exp);
}

/* The rules of tools/squad2_eval_ref.py: to_v2, predictions, na_probs. */
static int make_dev2(const char *dev2_path, const char *pred_path, const char *na_path)
{
    json_t *dev = load(tu_data("squad-v1.1/dev-v1.1.json")), *v1 = load("tests/data/eval_squad_pred.json");
    if (!dev || !v1) {
        json_decref(dev);
        json_decref(v1);
        return -1;
    }
    json_t *pred = json_object(), *na = json_object();
    json_object_set_new(na, "not-a-question-1", json_real(0.25));
    json_object_set_new(na, "not-a-question-2", json_integer(-3));
    long k = 0;
    size_t ai, pi, qi;
    json_t *art, *para, *qa;
    json_array_foreach(json_object_get(dev, "data"), ai, art) {
        json_array_foreach(json_object_get(art, "paragraphs"), pi, para) {
            json_array_foreach(json_object_get(para, "qas"), qi, qa) {
                const char *id = json_string_value(json_object_get(qa, "id"));
                int impossible = k % 3 == 1;
                if (impossible) json_array_clear(json_object_get(qa, "answers"));
                json_object_set_new(qa, "is_impossible", json_boolean(impossible));
                json_t *p = json_object_get(v1, id);
                const char *text = p ? json_string_value(p) : "";
                if (impossible && k % 2 == 0) text = "";
                json_object_set_new(pred, id, json_string(text));
                if (k % 11 == 0)
                    json_object_set_new(na, id, json_integer((k / 11) % 3));
                else
                    json_object_set_new(na, id, json_real((double)((k * 7919) % 1000) / 1000.0 + (text[0] ? 0.0 : 1.5) - 0.25));
                k++;
            }
        }
    }
    json_object_set_new(dev, "version", json_string("v2.0"));
    int rc = json_dump_file(dev, dev2_path, 0) || json_dump_file(pred, pred_path, 0) || json_dump_file(na, na_path, 0);
    CHECK(rc == 0, "writing the v2 dev files");
    json_decref(dev);
    json_decref(v1);
    json_decref(pred);
    json_decref(na);
    return rc ? -1 : 0;
}

static void test_dev(void)
{
    const char *dev2 = tu_tmp_path("dev2.json"), *pred = tu_tmp_path("pred2.json"), *na = tu_tmp_path("na2.json");
    if (make_dev2(dev2, pred, na)) return;
    json_t *exp = load("tests/data/squad2_expected.json");
    if (!exp) return;
    run_cases("dev v2", dev2, pred, na, exp);
    json_decref(exp);

    /* the in-memory entry point: the same numbers */
    squad_data d;
    int rc = squad_load(dev2, &d);
    CHECK(rc == 0, "squad_load %s: %s", dev2, err_msg());
    if (rc) return;
    json_t *pj = load(pred), *nj = load(na);
    const char **p = calloc((size_t)d.n, sizeof *p);
    double *nv = calloc((size_t)d.n, sizeof *nv);
    int impossible = 0;
    for (int i = 0; i < d.n; i++) {
        p[i] = json_string_value(json_object_get(pj, d.ex[i].id));
        nv[i] = json_number_value(json_object_get(nj, d.ex[i].id));
        impossible += d.ex[i].is_impossible;
    }
    CHECK(impossible == 3523, "is_impossible read for %d questions (want 3523)", impossible);
    squad2_result a, b;
    rc = squad2_eval_files(dev2, pred, na, 1.0, 0, &a);
    CHECK(rc == 0, "files: %s", err_msg());
    rc = rc ? rc : squad2_eval_examples(&d, p, nv, 1.0, &b);
    CHECK(rc == 0, "examples: %s", err_msg());
    if (!rc) {
        CHECK(a.exact == b.exact && a.f1 == b.f1 && a.total == b.total && a.has_ans_f1 == b.has_ans_f1 &&
                  a.no_ans_exact == b.no_ans_exact && a.best_exact == b.best_exact && a.best_f1 == b.best_f1 &&
                  atof(a.best_f1_thresh) == atof(b.best_f1_thresh),
              "squad2_eval_examples: exact %.17g f1 %.17g best_f1 %.17g at %s; files: %.17g %.17g %.17g at %s", b.exact, b.f1,
              b.best_f1, b.best_f1_thresh, a.exact, a.f1, a.best_f1, a.best_f1_thresh);
        printf("squad2_eval_examples: exact %.17g, f1 %.17g, best_f1 %.17g, as from the files\n", b.exact, b.f1, b.best_f1);
    }
    /* a missing prediction: evaluate-v2.0.py stops with a KeyError */
    const char *keep = p[5];
    p[5] = NULL;
    rc = squad2_eval_examples(&d, p, NULL, 1.0, &b);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), d.ex[5].id), "missing prediction: rc %d: %s", rc, err_msg());
    p[5] = keep;
    free(p);
    free(nv);
    json_decref(pj);
    json_decref(nj);
    squad_free(&d);
}

static void expect_fail(const char *what, const char *data, const char *pred, const char *na, const char *needle)
{
    squad2_result r;
    int rc = squad2_eval_files(data, pred, na, 1.0, 0, &r);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), needle), "%s: rc %d, message '%s' (want '%s')", what, rc, err_msg(), needle);
}

static void test_bad(void)
{
    const char *data = "tests/data/squad2_hand_data.json", *pred = "tests/data/squad2_hand_pred.json";
    expect_fail("missing prediction", data, tu_write_tmp("p1.json", "{\"h1\": \"x\"}"), NULL, "no prediction for question 'h2'");
    expect_fail("prediction not a string", data, tu_write_tmp("p2.json", "{\"h1\": 3}"), NULL, "not a string");
    expect_fail("missing no-answer value", data, pred, tu_write_tmp("n1.json", "{\"h1\": 0.5}"),
                "no no-answer probability for question 'h2'");
    expect_fail("no-answer value not a number", data, pred, tu_write_tmp("n2.json", "{\"h1\": \"0.5\"}"), "is not a number");
    expect_fail("no-answer file not an object", data, pred, tu_write_tmp("n3.json", "[1]"), "must be a JSON object");
    expect_fail("bad JSON", data, pred, tu_write_tmp("n4.json", "{\"h1\": 0.5,"), "n4.json:1:");
    expect_fail("duplicate ids",
                tu_write_tmp("d1.json", "{\"data\": [{\"paragraphs\": [{\"context\": \"c\", \"qas\": [{\"id\": \"a\", \"answers\": []},"
                                        " {\"id\": \"a\", \"answers\": []}]}]}]}"),
                tu_write_tmp("p3.json", "{\"a\": \"\"}"), NULL, "duplicate question id");
    expect_fail("no questions", tu_write_tmp("d2.json", "{\"data\": []}"), pred, NULL, "no questions");
    expect_fail("answers not a list",
                tu_write_tmp("d3.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"id\": \"a\", \"answers\": 1}]}]}]}"),
                pred, NULL, "\"answers\" missing or not an array");
}

int main(void)
{
    test_hand();
    test_dev();
    test_bad();
    return tu_done();
}
