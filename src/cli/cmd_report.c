/* bertc report RUN: rebuilds RUN/report.html from the run's CSV files. */
#include "core/args.h"
#include "core/err.h"
#include "obs/report.h"

#include <stdio.h>
#include <stdlib.h>

const char cmd_report_summary[] = "rebuild RUN/report.html (charts and summary) from a run's CSV files";

int cmd_report(int argc, char **argv)
{
    const char *out = NULL;
    const arg_spec specs[] = {
        {.name = "out", .type = ARG_STR, .ptr = &out, .metavar = "FILE", .help = "write the page here instead of RUN/report.html"},
        {0},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse("report", "bertc report RUN [--out FILE]", specs, argc, argv, &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (npos != 1) {
        free(pos);
        return err_set(ERR_INPUT, "report: expected one run directory, got %d argument(s) (usage: bertc report RUN)",
                       npos);
    }
    const char *run = pos[0];
    char path[4200];
    if (!out) snprintf(path, sizeof path, "%s/report.html", run);
    rc = report_write(run, out);
    if (!rc) printf("%s\n", out ? out : path);
    free(pos);
    return rc;
}
