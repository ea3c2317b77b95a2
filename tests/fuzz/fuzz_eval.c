/* The SQuAD v1.1 and CMRC 2018 metrics (src/eval) on arbitrary bytes.
 * Byte 0 picks what the rest is ('0', '1', '2' in the seeds; any byte works,
 * modulo 3):
 *   0  two answers, split at the first NUL (else in the middle): EM and F1
 *      of both metrics and normalize_answer. EM is 0 or 1, F1 in [0, 1] and
 *      symmetric, an answer against itself has EM 1 and F1 0 or 1.
 *   1  a predictions file ({"id": "answer"}) scored by eval_files against a
 *      fixed data file (English and Chinese questions) with both metrics.
 *   2  a data file scored by eval_files against fixed predictions.
 * eval_files must succeed with scores in [0, 100] and counts in range, or
 * fail with ERR_INPUT / ERR_RUNTIME and a message. */
#include "fuzz.h"
#include "eval/squad_eval.h"

#include <math.h>

static const char data_json[] =
    "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": ["
    "{\"context\": \"Super Bowl 50 was played at Levi's Stadium in Santa Clara, California.\", \"qas\": ["
    "{\"id\": \"q1\", \"question\": \"Where?\", \"answers\": [{\"text\": \"Levi's Stadium\", \"answer_start\": 28},"
    "{\"text\": \"Santa Clara, California\", \"answer_start\": 46}]},"
    "{\"id\": \"q2\", \"question\": \"Which game?\", \"answers\": [{\"text\": \"Super Bowl 50\", \"answer_start\": 0}]}]},"
    "{\"context\": \"\\u6211\\u7231\\u5317\\u4eac\\u5929\\u5b89\\u95e8\\uff0c2008\\u5e74\\u5965\\u8fd0\\u4f1a\\u3002\", "
    "\"qas\": [{\"id\": \"q3\", \"question\": \"\\u54ea\\u91cc\\uff1f\", \"answers\": "
    "[{\"text\": \"\\u5317\\u4eac\\u5929\\u5b89\\u95e8\", \"answer_start\": 2}]},"
    "{\"id\": \"q4\", \"question\": \"x\", \"answers\": []}]}]}]}";
static const char pred_json[] =
    "{\"q1\": \"the Levi's Stadium\", \"q2\": \"Super Bowl\", \"q3\": \"\\u5317\\u4eac\", \"q4\": \"\"}";
static char data_path[512], pred_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    snprintf(data_path, sizeof data_path, "%s", fuzz_write("data.json", data_json, sizeof data_json - 1));
    snprintf(pred_path, sizeof pred_path, "%s", fuzz_write("pred.json", pred_json, sizeof pred_json - 1));
    return 0;
}

static void check_pair(const char *a, size_t na, const char *b, size_t nb)
{
    int em_s = squad_exact_match(a, na, b, nb), em_c = cmrc_exact_match(a, na, b, nb);
    double f1_s = squad_f1(a, na, b, nb), f1_c = cmrc_f1(a, na, b, nb);
    FUZZ_ASSERT((em_s == 0 || em_s == 1) && (em_c == 0 || em_c == 1), "EM %d %d", em_s, em_c);
    FUZZ_ASSERT(f1_s >= 0 && f1_s <= 1 && f1_c >= 0 && f1_c <= 1, "F1 %g %g", f1_s, f1_c);
    FUZZ_ASSERT(squad_exact_match(b, nb, a, na) == em_s && cmrc_exact_match(b, nb, a, na) == em_c, "EM not symmetric");
    FUZZ_ASSERT(fabs(squad_f1(b, nb, a, na) - f1_s) < 1e-12 && fabs(cmrc_f1(b, nb, a, na) - f1_c) < 1e-12,
                "F1 not symmetric: %g %g", f1_s, f1_c);
    double self_s = squad_f1(a, na, a, na), self_c = cmrc_f1(a, na, a, na);
    FUZZ_ASSERT(squad_exact_match(a, na, a, na) == 1 && cmrc_exact_match(a, na, a, na) == 1, "EM of an answer with itself");
    FUZZ_ASSERT((self_s == 0 || self_s == 1) && (self_c == 0 || self_c == 1), "F1 with itself %g %g", self_s, self_c);
    size_t len;
    char *norm = squad_normalize_answer(a, na, &len);
    FUZZ_ASSERT(norm && strlen(norm) == len && len <= 4 * na + 4, "normalize_answer: %zu bytes from %zu", len, na);
    /* normalising is idempotent */
    size_t len2;
    char *again = squad_normalize_answer(norm, len, &len2);
    FUZZ_ASSERT(len2 == len && !memcmp(again, norm, len), "normalize_answer not idempotent: '%s' -> '%s'", norm, again);
    free(again);
    free(norm);
}

static void check_files(const char *data, const char *pred)
{
    for (int m = 0; m < 2; m++) {
        eval_result r;
        memset(&r, 0, sizeof r);
        err_clear();
        int rc = eval_files(data, pred, m ? EVAL_METRIC_CMRC : EVAL_METRIC_SQUAD, &r);
        fuzz_check_rc(rc, "eval_files");
        if (rc) continue;
        FUZZ_ASSERT(r.total > 0 && r.unanswered >= 0 && r.unanswered <= r.total && r.no_gold >= 0 &&
                        r.no_gold <= r.total,
                    "total %d unanswered %d no_gold %d", r.total, r.unanswered, r.no_gold);
        FUZZ_ASSERT(r.exact_match >= 0 && r.exact_match <= 100 + 1e-9 && r.f1 >= r.exact_match - 1e-9 - 100 &&
                        r.f1 >= 0 && r.f1 <= 100 + 1e-9,
                    "EM %g F1 %g", r.exact_match, r.f1);
        char buf[128];
        int n = eval_result_json(&r, buf, sizeof buf);
        FUZZ_ASSERT(n > 0 && (size_t)n < sizeof buf && buf[0] == '{', "eval_result_json %d", n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 1) return 0;
    int mode = in[0] % 3;
    const char *s = (const char *)in + 1;
    size_t n = size - 1;
    if (mode == 0) {
        const char *nul = memchr(s, 0, n);
        size_t na = nul ? (size_t)(nul - s) : n / 2;
        /* copies, so that ASan sees reads past either answer */
        char *a = malloc(na + 1), *b = malloc(n - na + 1);
        FUZZ_ASSERT(a && b, "malloc");
        memcpy(a, s, na);
        a[na] = 0;
        size_t nb = nul ? n - na - 1 : n - na;
        memcpy(b, s + (n - nb), nb);
        b[nb] = 0;
        check_pair(a, na, b, nb);
        free(a);
        free(b);
    } else if (mode == 1) {
        check_files(data_path, fuzz_write("fuzz_pred.json", s, n));
    } else {
        char path[512];
        snprintf(path, sizeof path, "%s", fuzz_write("fuzz_data.json", s, n));
        check_files(path, pred_path);
    }
    return 0;
}
