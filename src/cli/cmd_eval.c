/* bertc eval DATA.json PRED.json [--metric squad|cmrc]
 * bertc eval --version-2-with-negative DATA.json PRED.json [--na-prob-file NA.json]
 *
 * Prints {"exact_match": E, "f1": F} exactly as evaluate-v1.1.py prints it
 * (the same bytes), or CMRC 2018's EM and F1 in the same shape. Unanswered
 * questions score 0 and are counted on stderr. With --version-2-with-negative,
 * the indented JSON that evaluate-v2.0.py prints (exact, f1, total, HasAns_*,
 * NoAns_*, and best_* with a no-answer file), byte for byte. */
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "eval/squad2_eval.h"
#include "eval/squad_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_eval_summary[] = "exact match and F1 of predictions, as the official SQuAD (or CMRC) script";

static int eval_v2(const char *data, const char *pred, const char *na_file, double na_thresh, int py312,
                   const char *out_file)
{
    squad2_result r;
    int rc = squad2_eval_files(data, pred, na_file, na_thresh, py312, &r);
    if (rc) return rc;
    char out[1024];
    int n = squad2_result_json(&r, !out_file, out, sizeof out);
    if (out_file) return file_write_atomic(out_file, out, (size_t)n);
    printf("%s\n", out);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    const char *metric = "squad", *na_file = NULL, *out_file = NULL, *pysum = "3.11";
    int v2 = 0, metric_given = 0, thresh_given = 0;
    double na_thresh = 1.0;
    const arg_spec specs[] = {
        {"metric", ARG_STR, &metric, "NAME", "squad (evaluate-v1.1.py, default) or cmrc (cmrc2018_evaluate.py)", .min = 0,
         .seen = &metric_given},
        {"version-2-with-negative", ARG_FLAG, &v2, NULL, "SQuAD 2.0: evaluate-v2.0.py's metric (unanswerable questions)", .min = 0},
        {"na-prob-file", ARG_STR, &na_file, "NULL_ODDS.json",
         "with --version-2-with-negative: no-answer scores {\"id\": x} (bertc predict --null-odds); adds best_*", .min = 0},
        {"na-prob-thresh", ARG_DOUBLE, &na_thresh, "X",
         "with --version-2-with-negative: a no-answer score above X predicts \"\" (default 1.0, as evaluate-v2.0.py)",
         .seen = &thresh_given},
        {"python-sum", ARG_STR, &pysum, "3.11|3.12",
         "with --version-2-with-negative: the numbers of evaluate-v2.0.py under Python 3.11 and earlier (default) or 3.12 "
         "and later, whose sum() differs in the last digits", .min = 0},
        {"out-file", ARG_STR, &out_file, "FILE",
         "with --version-2-with-negative: write the metrics to FILE (one line, as evaluate-v2.0.py -o) instead of printing",
         .min = 0},
        {0},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse("eval",
                        "bertc eval DATA.json PRED.json [--metric squad|cmrc]\n"
                        "       bertc eval --version-2-with-negative DATA.json PRED.json [--na-prob-file NULL_ODDS.json]",
                        specs, argc, argv, &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    eval_metric m = EVAL_METRIC_SQUAD;
    if (npos != 2) {
        rc = err_set(ERR_INPUT, "eval: expected DATA.json and PRED.json, got %d file(s) (see bertc eval --help)", npos);
        goto done;
    }
    if (v2) {
        if (metric_given && strcmp(metric, "squad") != 0) {
            rc = err_set(ERR_INPUT, "eval: --version-2-with-negative is the SQuAD 2.0 metric; it does not go with --metric %s",
                         metric);
            goto done;
        }
        if (out_file && path_is_dir(out_file)) {
            rc = err_set(ERR_INPUT, "eval --out-file %s: is a directory", out_file);
            goto done;
        }
        if (strcmp(pysum, "3.11") != 0 && strcmp(pysum, "3.12") != 0) {
            rc = err_set(ERR_INPUT, "eval --python-sum: '%s' is not 3.11 or 3.12", pysum);
            goto done;
        }
        rc = eval_v2(pos[0], pos[1], na_file, na_thresh, !strcmp(pysum, "3.12"), out_file);
        goto flush;
    }
    if (na_file || thresh_given || out_file) {
        rc = err_set(ERR_INPUT, "eval: --na-prob-file, --na-prob-thresh and --out-file need --version-2-with-negative");
        goto done;
    }
    if (!strcmp(metric, "cmrc")) {
        m = EVAL_METRIC_CMRC;
    } else if (strcmp(metric, "squad") != 0) {
        rc = err_set(ERR_INPUT, "eval: --metric must be squad or cmrc, not '%s'", metric);
        goto done;
    }
    eval_result r;
    rc = eval_files(pos[0], pos[1], m, &r);
    if (rc) goto done;
    if (r.unanswered) fprintf(stderr, "%d unanswered questions (scored 0)\n", r.unanswered);
    if (r.no_gold) fprintf(stderr, "%d questions without gold answers (scored 0)\n", r.no_gold);
    if (r.impossible)
        fprintf(stderr, "note: %s has %d unanswerable (is_impossible) questions: SQuAD 2.0 data; "
                        "evaluate-v2.0.py's metric is bertc eval --version-2-with-negative\n", pos[0], r.impossible);
    char line[96];
    eval_result_json(&r, line, sizeof line);
    printf("%s\n", line);
flush:
    if (!rc && fflush(stdout) != 0) rc = err_set(ERR_RUNTIME, "eval: cannot write to stdout");
done:
    free(pos);
    return rc;
}
