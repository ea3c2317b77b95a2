/* The official SQuAD v1.1 and CMRC 2018 metrics (src/eval).
 *
 * - Python 3.11's str.lower(), isspace, re \w and final-sigma context, over
 *   every code point, and repr() of 2,000 floats (tests/data/eval_unicode.json,
 *   made by tools/squad_eval_ref.py);
 * - hand-made files with values worked out by hand (tests/data/eval_hand_*);
 * - 1,500 per-question EM/F1 values and the output line of evaluate-v1.1.py
 *   on perturbed predictions for the whole SQuAD dev set;
 * - CMRC: nltk's NLTKWordTokenizer on 3,000 strings, and per-question values
 *   and the printed line of a Python 3 port of cmrc2018_evaluate.py on
 *   perturbed predictions for the CMRC trial set and XQuAD zh;
 * - gold answers as predictions give 100/100 (SQuAD dev, CMRC trial);
 * - bad files are rejected with the file and line:column or the id. */
#include "testutil.h"

#include "core/err.h"
#include "eval/pytext.h"
#include "eval/squad_eval.h"
#include "eval/treebank.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) fprintf(stderr, "cannot load %s: %d:%d: %s\n", path, e.line, e.column, e.text);
    return j;
}

static void lower1(const int32_t *in, size_t n, pytext_cps *out)
{
    pytext_cps t = {(int32_t *)in, n, n};
    out->n = 0;
    pytext_lower(&t, out);
}

static void test_unicode(void)
{
    json_t *u = load("tests/data/eval_unicode.json");
    CHECK(u != NULL, "eval_unicode.json");
    if (!u) return;
    int step = tu_sanitized() ? 7 : 1;
    /* str.lower() of each code point alone */
    uint8_t *changed = calloc(0x110000, 1);
    size_t i;
    json_t *e;
    int bad = 0;
    pytext_cps out = {0};
    json_array_foreach(json_object_get(u, "lower"), i, e) {
        int32_t cp = (int32_t)json_integer_value(json_array_get(e, 0));
        json_t *want = json_array_get(e, 1);
        changed[cp] = 1;
        lower1(&cp, 1, &out);
        int ok = out.n == json_array_size(want);
        for (size_t k = 0; ok && k < out.n; k++) ok = out.cp[k] == json_integer_value(json_array_get(want, k));
        if (!ok && bad++ < 5) fprintf(stderr, "lower(U+%04X) differs from Python\n", (unsigned)cp);
    }
    for (int32_t cp = 0; cp < 0x110000; cp += step) {
        if ((cp >= 0xD800 && cp < 0xE000) || changed[cp]) continue;
        lower1(&cp, 1, &out);
        if ((out.n != 1 || out.cp[0] != cp) && bad++ < 5) fprintf(stderr, "lower(U+%04X) should be itself\n", (unsigned)cp);
    }
    CHECK(bad == 0, "%d code points lower-case differently from Python's str.lower()", bad);
    printf("str.lower: %zu mappings checked, the rest identity (step %d)\n", json_array_size(json_object_get(u, "lower")), step);

    /* isspace and \w as ranges */
    const char *names[2] = {"space", "word"};
    for (int w = 0; w < 2; w++) {
        memset(changed, 0, 0x110000);
        json_array_foreach(json_object_get(u, names[w]), i, e) {
            for (json_int_t c = json_integer_value(json_array_get(e, 0)); c <= json_integer_value(json_array_get(e, 1)); c++)
                changed[c] = 1;
        }
        int nbad = 0;
        for (int32_t cp = 0; cp < 0x110000; cp++) {
            if (cp >= 0xD800 && cp < 0xE000) continue;
            int got = w ? pytext_isword(cp) : pytext_isspace(cp);
            if (got != changed[cp] && nbad++ < 5) fprintf(stderr, "%s(U+%04X): got %d\n", names[w], (unsigned)cp, got);
        }
        CHECK(nbad == 0, "%d code points differ from Python's %s", nbad, names[w]);
        printf("%s: all code points agree with Python\n", w ? "re \\w" : "str.isspace");
    }

    /* final sigma: the class of each code point as context of U+03A3 */
    int32_t cp = 0, nbad = 0;
    json_array_foreach(json_object_get(u, "sigma_class_runs"), i, e) {
        int cls = (int)json_integer_value(json_array_get(e, 0));
        int32_t n = (int32_t)json_integer_value(json_array_get(e, 1));
        for (int32_t end = cp + n; cp < end; cp++) {
            if ((cp >= 0xD800 && cp < 0xE000) || (step > 1 && cp % step && cls == 0)) continue;
            int32_t a[3] = {'A', 0x3A3, cp}, b[3] = {'A', cp, 0x3A3};
            lower1(a, 3, &out);
            int got = out.cp[1] == 0x3C3 ? 2 : -1;
            if (got < 0) {
                lower1(b, 3, &out);
                got = out.cp[out.n - 1] == 0x3C2 ? 1 : 0;
            }
            if (got != cls && nbad++ < 5) fprintf(stderr, "sigma context class of U+%04X: got %d want %d\n", (unsigned)cp, got, cls);
        }
    }
    CHECK(cp == 0x110000 && nbad == 0, "final sigma: %d code points differ (covered up to U+%X)", nbad, (unsigned)cp);
    printf("final sigma: cased / case-ignorable classes agree with Python\n");

    int fbad = 0, nf = 0;
    json_array_foreach(json_object_get(u, "float_repr"), i, e) {
        const char *hex = json_string_value(json_array_get(e, 0));
        const char *want = json_string_value(json_array_get(e, 1));
        uint64_t bits = 0;
        for (int k = 0; k < 8; k++) {
            unsigned byte;
            sscanf(hex + 2 * k, "%2x", &byte);
            bits |= (uint64_t)byte << (8 * k);
        }
        double x;
        memcpy(&x, &bits, sizeof x);
        char got[40];
        pytext_float_repr(x, got, sizeof got);
        nf++;
        if (strcmp(got, want) != 0 && fbad++ < 5) fprintf(stderr, "repr(%s): got %s want %s\n", hex, got, want);
    }
    CHECK(fbad == 0 && nf > 1000, "repr(float): %d of %d differ from Python", fbad, nf);
    printf("repr(float): %d values agree with Python\n", nf);
    pytext_cps_free(&out);
    free(changed);
    json_decref(u);
}

/* One hand-checked question: prediction, gold answer, expected EM and F1. */
typedef struct {
    const char *pred, *gold;
    int em;
    double f1;
} hand_case;

static void test_hand(void)
{
    hand_case c[] = {
        {"eiffel tower!", "The Eiffel Tower", 1, 1.0},
        {"the Denver Broncos team", "Denver Broncos", 0, 0.8},        /* P 2/3, R 1 */
        {"the Denver Broncos team", "Broncos", 0, 0.5},               /* P 1/3, R 1 */
        {"1000 years", "1,000 years", 1, 1.0},
        {"CAFÉ", "café", 1, 1.0},
        {"A\u3000B", "a b", 1, 1.0},                                   /* both normalise to "b" */
        {"", "the", 1, 0.0},                                           /* equal but no shared token */
        {"the é", "Theé", 0, 0.0},                                     /* "é" vs "theé" */
        {"new york new york", "New York", 0, 2 * 0.5 * 1.0 / 1.5},     /* P 2/4 */
        {"i\u0307zmir", "\u0130zmir", 1, 1.0},
        {"izmir", "\u0130zmir", 0, 0.0},
        {"x\u00a0y\u2003z", "x y z", 1, 1.0},
        {"x\u200by", "x y", 0, 0.0},                                   /* U+200B is not whitespace */
        {"an apple a day", "apple day", 1, 1.0},
        {"anapple", "apple", 0, 0.0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int em = squad_exact_match(c[i].pred, strlen(c[i].pred), c[i].gold, strlen(c[i].gold));
        double f1 = squad_f1(c[i].pred, strlen(c[i].pred), c[i].gold, strlen(c[i].gold));
        CHECK(em == c[i].em && f1 == c[i].f1, "'%s' vs '%s': em %d f1 %.17g, want %d %.17g", c[i].pred, c[i].gold, em,
              f1, c[i].em, c[i].f1);
    }
    size_t n;
    char *s = squad_normalize_answer("The  Cat's (hat),\tan\u00a0A-team!", strlen("The  Cat's (hat),\tan\u00a0A-team!"), &n);
    CHECK(strcmp(s, "cats hat ateam") == 0, "normalize_answer: '%s'", s);
    free(s);

    /* the hand file: EM 6/10; F1 1+.8+1+1+1+0+0+0+2/3+1, summed in order */
    eval_result r;
    char line[128];
    int rc = eval_files("tests/data/eval_hand_data.json", "tests/data/eval_hand_pred.json", EVAL_METRIC_SQUAD, &r);
    CHECK(rc == 0, "eval hand files: %s", err_msg());
    eval_result_json(&r, line, sizeof line);
    printf("hand SQuAD file: %s (%d unanswered)\n", line, r.unanswered);
    CHECK(strcmp(line, "{\"exact_match\": 60.0, \"f1\": 64.66666666666666}") == 0 && r.unanswered == 1 && r.total == 10,
          "hand file: %s, %d unanswered", line, r.unanswered);

    /* CMRC by hand: c1 EM1 F1 1 ('。' dropped); c2 EM0, LCS 2 of 4 and 2 -> 2/3;
     * c3 EM1 F1 1 (lower, strip); c4 EM1 F1 1 (《》 dropped); c5 EM0, LCS 2 of
     * 5 and 5 -> 0.4 (id ' c5 ' stripped); c6 unanswered. */
    hand_case k[] = {
        {"1990年。", "1990年", 1, 1.0},
        {"北京", "北京大学", 0, 2.0 / 3.0},
        {" kaji dha ", "Kaji Dha", 1, 1.0},
        {"红楼梦", "《红楼梦》", 1, 1.0},
        {"小红和小明", "小明和小红", 0, (2 * 0.4 * 0.4) / (0.4 + 0.4)},
        {"(Kaji Dha)", "kaji dha", 0, 2 * 0.5 * 1.0 / 1.5}, /* brackets are tokens: P 2/4 */
        {"99%的细菌", "99%", 0, (2 * 0.4 * 1.0) / (0.4 + 1.0)}, /* [99 % 的 细 菌] vs [99 %] */
        {"a-b", "ab", 1, 1.0},                              /* '-' is removed, not a separator */
        {"……", "", 0, 0.0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        int em = cmrc_exact_match(k[i].pred, strlen(k[i].pred), k[i].gold, strlen(k[i].gold));
        double f1 = cmrc_f1(k[i].pred, strlen(k[i].pred), k[i].gold, strlen(k[i].gold));
        CHECK(em == k[i].em && f1 == k[i].f1, "cmrc '%s' vs '%s': em %d f1 %.17g, want %d %.17g", k[i].pred, k[i].gold,
              em, f1, k[i].em, k[i].f1);
    }
    rc = eval_files("tests/data/eval_hand_cmrc_data.json", "tests/data/eval_hand_cmrc_pred.json", EVAL_METRIC_CMRC, &r);
    CHECK(rc == 0, "eval hand CMRC files: %s", err_msg());
    eval_result_json(&r, line, sizeof line);
    printf("hand CMRC file: %s (%d unanswered)\n", line, r.unanswered);
    CHECK(strcmp(line, "{\"exact_match\": 50.0, \"f1\": 67.77777777777777}") == 0 && r.unanswered == 1,
          "hand CMRC file: %s, %d unanswered", line, r.unanswered);

    /* in memory, on a squad_data made by hand */
    char *g1[] = {"Denver Broncos", "Broncos"}, *g2[] = {"the"};
    squad_example ex[3] = {{.id = "a", .n_answers = 2, .answer_text = g1}, {.id = "b", .n_answers = 1, .answer_text = g2},
                           {.id = "c", .n_answers = 0}};
    squad_data d = {.ex = ex, .n = 3};
    const char *pred[3] = {"Broncos", NULL, "x"};
    rc = eval_examples(&d, pred, EVAL_METRIC_SQUAD, &r);
    eval_result_json(&r, line, sizeof line);
    CHECK(rc == 0 && r.unanswered == 1 && r.no_gold == 1 && strcmp(line, "{\"exact_match\": 33.333333333333336, \"f1\": 33.333333333333336}") == 0,
          "eval_examples: %s unanswered %d no_gold %d", line, r.unanswered, r.no_gold);
}

/* Each case [pred, [gold...], em, f1] of a reference file scored by
 * eval_question; returns how many differ (the first 10 are printed), *n the
 * count of cases. */
static int compare_cases(json_t *cases, eval_metric m, const char *label, int *n)
{
    size_t i;
    json_t *c;
    int bad = 0;
    *n = 0;
    json_array_foreach(cases, i, c) {
        json_t *p = json_array_get(c, 0), *golds = json_array_get(c, 1);
        const char *g[64];
        size_t gl[64];
        int ng = 0;
        for (size_t k = 0; k < json_array_size(golds) && ng < 64; k++, ng++) {
            g[ng] = json_string_value(json_array_get(golds, k));
            gl[ng] = json_string_length(json_array_get(golds, k));
        }
        int em;
        double f1;
        eval_question(m, json_string_value(p), json_string_length(p), g, gl, ng, &em, &f1);
        int wem = (int)json_integer_value(json_array_get(c, 2));
        double wf1 = json_real_value(json_array_get(c, 3));
        (*n)++;
        if ((em != wem || f1 != wf1) && bad++ < 10)
            fprintf(stderr, "%s%scase %zu: pred '%s' gold[0] '%s': em %d f1 %.17g, Python %d %.17g\n", label,
                    label[0] ? " " : "", i, json_string_value(p), ng ? g[0] : "", em, f1, wem, wf1);
    }
    return bad;
}

static void test_reference_cases(void)
{
    json_t *x = load("tests/data/eval_squad_expected.json");
    CHECK(x != NULL, "eval_squad_expected.json");
    if (!x) return;
    int n = 0, bad = compare_cases(json_object_get(x, "cases"), EVAL_METRIC_SQUAD, "", &n);
    CHECK(bad == 0 && n > 1000, "%d of %d per-question values differ from evaluate-v1.1.py", bad, n);
    printf("per-question EM/F1: %d cases equal to evaluate-v1.1.py\n", n);

    eval_result r;
    char line[128];
    int rc = eval_files(tu_data("squad-v1.1/dev-v1.1.json"), "tests/data/eval_squad_pred.json", EVAL_METRIC_SQUAD, &r);
    CHECK(rc == 0, "eval perturbed: %s", err_msg());
    eval_result_json(&r, line, sizeof line);
    const char *want = json_string_value(json_object_get(x, "output"));
    printf("perturbed dev predictions: got  %s\n                           want %s\n", line, want);
    CHECK(want && strcmp(line, want) == 0, "printed line differs from evaluate-v1.1.py");
    CHECK(r.total == 10570 && r.unanswered == 10570 - json_integer_value(json_object_get(x, "answered")),
          "total %d unanswered %d", r.total, r.unanswered);
    json_decref(x);
}

typedef struct {
    pytext_cps all; /* tokens separated by -1 */
    int n;
} tb_tokens;

static void tb_emit(void *ctx, const int32_t *cp, size_t n)
{
    tb_tokens *t = ctx;
    for (size_t i = 0; i < n; i++) pytext_push(&t->all, cp[i]);
    pytext_push(&t->all, -1);
    t->n++;
}

/* nltk's NLTKWordTokenizer on 3,000 strings of quotes, contractions,
 * periods, dashes and brackets (tests/data/eval_treebank.json). */
static void test_treebank(void)
{
    json_t *x = load("tests/data/eval_treebank.json");
    CHECK(x != NULL, "eval_treebank.json");
    if (!x) return;
    size_t i, k;
    json_t *c, *w;
    int bad = 0, n = 0;
    json_array_foreach(x, i, c) {
        json_t *in = json_array_get(c, 0);
        pytext_cps cps = {0}, want = {0};
        pytext_decode(json_string_value(in), json_string_length(in), &cps);
        json_array_foreach(json_array_get(c, 1), k, w) {
            pytext_decode(json_string_value(w), json_string_length(w), &want);
            pytext_push(&want, -1);
        }
        tb_tokens got = {{0}, 0};
        treebank_tokenize(cps.cp, cps.n, tb_emit, &got);
        int same = got.all.n == want.n && (want.n == 0 || memcmp(got.all.cp, want.cp, want.n * sizeof(int32_t)) == 0);
        n++;
        if (!same && bad++ < 10) {
            fprintf(stderr, "treebank '%s': got", json_string_value(in));
            for (size_t j = 0; j < got.all.n; j++) {
                if (got.all.cp[j] < 0) fputc('|', stderr);
                else fputc(got.all.cp[j] < 0x80 ? got.all.cp[j] : '?', stderr);
            }
            fputc('\n', stderr);
        }
        pytext_cps_free(&cps);
        pytext_cps_free(&want);
        pytext_cps_free(&got.all);
    }
    CHECK(bad == 0 && n >= 3000, "%d of %d strings tokenised differently from nltk's NLTKWordTokenizer", bad, n);
    printf("NLTKWordTokenizer port: %d of %d strings differ from nltk\n", bad, n);
    json_decref(x);
}

/* CMRC: perturbed predictions for the CMRC trial set and XQuAD zh, scored by
 * tools/squad_eval_ref.py's port of cmrc2018_evaluate.py (with nltk's
 * NLTKWordTokenizer). Reports how many questions the word_tokenize
 * approximation scores differently; requires the printed lines to match. */
static void test_cmrc_reference(void)
{
    json_t *x = load("tests/data/eval_cmrc_expected.json");
    CHECK(x != NULL, "eval_cmrc_expected.json");
    if (!x) return;
    const char *sets[2] = {"cmrc_trial", "xquad_zh"};
    for (int s = 0; s < 2; s++) {
        json_t *set = json_object_get(x, sets[s]);
        int n = 0, bad = compare_cases(json_object_get(set, "cases"), EVAL_METRIC_CMRC, sets[s], &n);
        CHECK(bad == 0 && n > 200, "%s: %d of %d per-question values differ from cmrc2018_evaluate.py", sets[s], bad, n);
        printf("%s: per-question CMRC EM/F1: %d of %d cases differ\n", sets[s], bad, n);
        char pred[256], data_rel[256], line[128];
        snprintf(pred, sizeof pred, "tests/data/eval_%s_pred.json", sets[s]);
        snprintf(data_rel, sizeof data_rel, "%s", json_string_value(json_object_get(set, "data")));
        eval_result r;
        int rc = eval_files(tu_data(data_rel), pred, EVAL_METRIC_CMRC, &r);
        eval_result_json(&r, line, sizeof line);
        const char *want = json_string_value(json_object_get(set, "output"));
        printf("%s perturbed, --metric cmrc: got  %s\n%*s want %s\n", sets[s], line, (int)strlen(sets[s]) + 25, "", want);
        CHECK(rc == 0 && want && strcmp(line, want) == 0, "%s: printed line differs from cmrc2018_evaluate.py", sets[s]);
    }
    json_decref(x);
}

/* Writes {"id": first gold answer} for every question of a data file. */
static int gold_predictions(const char *data, const char *out)
{
    json_t *d = load(data), *p = json_object();
    if (!d) return -1;
    size_t a, b, c;
    json_t *art, *para, *qa;
    json_array_foreach(json_object_get(d, "data"), a, art) {
        json_array_foreach(json_object_get(art, "paragraphs"), b, para) {
            json_array_foreach(json_object_get(para, "qas"), c, qa) {
                json_t *ans = json_array_get(json_object_get(qa, "answers"), 0);
                json_object_set(p, json_string_value(json_object_get(qa, "id")), json_object_get(ans, "text"));
            }
        }
    }
    int rc = json_dump_file(p, out, 0);
    json_decref(d);
    json_decref(p);
    return rc;
}

static void test_gold(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gold_squad.json", tu_tmpdir());
    eval_result r;
    char line[128];
    CHECK(gold_predictions(tu_data("squad-v1.1/dev-v1.1.json"), path) == 0, "write %s", path);
    int rc = eval_files(tu_data("squad-v1.1/dev-v1.1.json"), path, EVAL_METRIC_SQUAD, &r);
    eval_result_json(&r, line, sizeof line);
    printf("SQuAD dev, gold as predictions: %s\n", line);
    CHECK(rc == 0 && strcmp(line, "{\"exact_match\": 100.0, \"f1\": 100.0}") == 0 && r.total == 10570, "%s", line);

    snprintf(path, sizeof path, "%s/gold_cmrc.json", tu_tmpdir());
    CHECK(gold_predictions(tu_data("cmrc2018/cmrc2018_trial.json"), path) == 0, "write %s", path);
    rc = eval_files(tu_data("cmrc2018/cmrc2018_trial.json"), path, EVAL_METRIC_CMRC, &r);
    eval_result_json(&r, line, sizeof line);
    printf("CMRC trial, gold as predictions, --metric cmrc: %s (%d questions)\n", line, r.total);
    CHECK(rc == 0 && strcmp(line, "{\"exact_match\": 100.0, \"f1\": 100.0}") == 0 && r.total == 1002, "%s", line);
}

static void test_errors(void)
{
    eval_result r;
    int rc = eval_files("tests/data/eval_hand_data.json", "tests/data/eval_bad_pred_syntax.json", EVAL_METRIC_SQUAD, &r);
    printf("malformed: %s\n", err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "tests/data/eval_bad_pred_syntax.json:2:") != NULL, "%s", err_msg());
    rc = eval_files("tests/data/eval_hand_data.json", "tests/data/eval_bad_pred_type.json", EVAL_METRIC_SQUAD, &r);
    printf("not a string: %s\n", err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "'q2'") != NULL, "%s", err_msg());
    rc = eval_files("tests/data/no-such-file.json", "tests/data/eval_hand_pred.json", EVAL_METRIC_SQUAD, &r);
    printf("missing: %s\n", err_msg());
    CHECK(rc != 0 && strstr(err_msg(), "no-such-file.json") != NULL, "%s", err_msg());
    /* a prediction file given as data */
    rc = eval_files("tests/data/eval_hand_pred.json", "tests/data/eval_hand_pred.json", EVAL_METRIC_SQUAD, &r);
    printf("not SQuAD: %s\n", err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "\"data\"") != NULL, "%s", err_msg());
}

/* Mutated data and prediction files: every run ends in a result or ERR_INPUT,
 * never a crash (run under ASan too). */
static void test_mutations(void)
{
    const char *src[2] = {"tests/data/eval_hand_data.json", "tests/data/eval_hand_pred.json"};
    char *orig[2];
    size_t len[2];
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(src[k], "rb");
        CHECK(f != NULL, "open %s", src[k]);
        if (!f) return;
        orig[k] = malloc(1 << 16);
        len[k] = fread(orig[k], 1, 1 << 16, f);
        fclose(f);
    }
    char path[2][512];
    snprintf(path[0], sizeof path[0], "%s/mut_data.json", tu_tmpdir());
    snprintf(path[1], sizeof path[1], "%s/mut_pred.json", tu_tmpdir());
    uint64_t st = 0x9E3779B97F4A7C15ull;
    int ok = 0, input = 0, other = 0, runs = tu_sanitized() ? 300 : 1500;
    const char pool[] = "{}[]\",:0\\ \x01\xc3\xa9\xff";
    for (int it = 0; it < runs; it++) {
        int k = it & 1;
        char buf[1 << 16];
        memcpy(buf, orig[k], len[k]);
        size_t n = len[k];
        int edits = 1 + (int)((st >> 60) & 3);
        for (int e = 0; e < edits; e++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(st >> 33) % n;
            int op = (int)((st >> 20) % 3);
            if (op == 0) buf[pos] = pool[(st >> 8) % (sizeof pool - 1)];
            else if (op == 1 && n > 1) memmove(buf + pos, buf + pos + 1, --n - pos);
            else n = pos; /* truncate */
            if (n == 0) break;
        }
        FILE *f = fopen(path[k], "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        eval_result r;
        int rc = eval_files(k ? src[0] : path[0], k ? path[1] : src[1], it % 3 ? EVAL_METRIC_SQUAD : EVAL_METRIC_CMRC, &r);
        if (rc == 0) ok++;
        else if (rc == ERR_INPUT) input++;
        else other++;
    }
    printf("mutated files: %d evaluated, %d rejected as bad input, %d other\n", ok, input, other);
    CHECK(other == 0 && input > 0, "mutations: %d runs ended with a code other than 0 or ERR_INPUT", other);
    free(orig[0]);
    free(orig[1]);
}

int main(void)
{
    log_quiet(1);
    test_unicode();
    test_hand();
    test_reference_cases();
    test_treebank();
    test_cmrc_reference();
    test_gold();
    test_errors();
    test_mutations();
    return tu_done();
}
