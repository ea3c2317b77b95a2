/* bertc eval DATA.json PRED.json [--metric squad|cmrc]
 *
 * Prints {"exact_match": E, "f1": F} exactly as evaluate-v1.1.py prints it
 * (the same bytes), or CMRC 2018's EM and F1 in the same shape. Unanswered
 * questions score 0 and are counted on stderr. */
#include "core/args.h"
#include "core/err.h"
#include "eval/squad_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_eval_summary[] = "exact match and F1 of predictions, as the official SQuAD (or CMRC) script";

int cmd_eval(int argc, char **argv)
{
    const char *metric = "squad";
    const arg_spec specs[] = {
        {"metric", ARG_STR, &metric, "NAME", "squad (evaluate-v1.1.py, default) or cmrc (cmrc2018_evaluate.py)", .min = 0},
        {0},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse("eval", "bertc eval DATA.json PRED.json [--metric squad|cmrc]", specs, argc, argv, &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    eval_metric m = EVAL_METRIC_SQUAD;
    if (npos != 2) {
        rc = err_set(ERR_INPUT, "eval: expected DATA.json and PRED.json, got %d file(s) (see bertc eval --help)", npos);
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
    char line[96];
    eval_result_json(&r, line, sizeof line);
    printf("%s\n", line);
    if (fflush(stdout) != 0) rc = err_set(ERR_RUNTIME, "eval: cannot write to stdout");
done:
    free(pos);
    return rc;
}
