/* squad2_eval_files (evaluate-v2.0.py) on arbitrary bytes: the input is
 * split at its first two NUL bytes into the data file, the predictions and
 * the no-answer file (absent when there is no second NUL); byte 0 of the
 * no-answer part, when present, also picks the threshold, and the data's
 * length Python 3.11's or 3.12's sum(). It evaluates or
 * fails with ERR_INPUT, and what it prints is consistent: percentages in
 * [0, 100], HasAns + NoAns = total, the JSON fits its buffer. */
#include "fuzz.h"
#include "eval/squad2_eval.h"

FUZZ_QUIET_INIT

static int in_range(double x) { return x >= 0.0 && x <= 100.0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *a = memchr(data, 0, size);
    size_t n0 = a ? (size_t)(a - data) : size;
    const uint8_t *p1 = a ? a + 1 : data + size;
    size_t rest = (size_t)(data + size - p1);
    const uint8_t *b = a ? memchr(p1, 0, rest) : NULL;
    size_t n1 = b ? (size_t)(b - p1) : rest;
    char dpath[512], ppath[512], npath[512];
    snprintf(dpath, sizeof dpath, "%s", fuzz_write("data.json", data, n0));
    snprintf(ppath, sizeof ppath, "%s", fuzz_write("pred.json", p1, n1));
    const char *na = NULL;
    double thresh = 1.0;
    if (b) {
        const uint8_t *p2 = b + 1;
        size_t n2 = (size_t)(data + size - p2);
        snprintf(npath, sizeof npath, "%s", fuzz_write("na.json", p2, n2));
        na = npath;
        static const double th[4] = {1.0, 0.0, -1.0, 0.5};
        if (n2) thresh = th[p2[0] & 3];
    }
    squad2_result r;
    int rc = squad2_eval_files(dpath, ppath, na, thresh, n0 & 1, &r);
    fuzz_check_rc(rc, "squad2_eval_files");
    if (rc) return 0;
    FUZZ_ASSERT(r.total > 0 && r.has_ans_total >= 0 && r.no_ans_total >= 0 && r.has_ans_total + r.no_ans_total == r.total,
                "totals %d %d %d", r.total, r.has_ans_total, r.no_ans_total);
    FUZZ_ASSERT(in_range(r.exact) && in_range(r.f1) && r.exact <= r.f1 + 1e-9, "exact %g f1 %g", r.exact, r.f1);
    FUZZ_ASSERT(in_range(r.has_ans_exact) && in_range(r.has_ans_f1) && in_range(r.no_ans_exact) && in_range(r.no_ans_f1),
                "group scores");
    FUZZ_ASSERT(r.have_best == (na != NULL), "best_* without a no-answer file");
    if (r.have_best) FUZZ_ASSERT(in_range(r.best_exact) && in_range(r.best_f1), "best %g %g", r.best_exact, r.best_f1);
    char out[1024];
    int len = squad2_result_json(&r, 1, out, sizeof out);
    FUZZ_ASSERT(len > 0 && (size_t)len < sizeof out, "JSON of %d bytes", len);
    return 0;
}
