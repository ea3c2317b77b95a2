/* bertc report RUN: rebuilds RUN/report.html from the run's CSV files. */
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "obs/report.h"

#include <stdio.h>

const char cmd_report_summary[] = "rebuild RUN/report.html (charts and summary) from a run's CSV files";

int cmd_report(int argc, char **argv)
{
    const char *out = NULL;
    const arg_spec specs[] = {
        {.name = "out", .type = ARG_STR, .ptr = &out, .metavar = "FILE", .help = "write the page here instead of RUN/report.html"},
        {0},
    };
    const char *run;
    int rc = cli_parse_run("report", "bertc report RUN [--out FILE]", specs, argc, argv, &run);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    char path[4200];
    if (!out) snprintf(path, sizeof path, "%s/report.html", run);
    rc = report_write(run, out);
    if (!rc) printf("%s\n", out ? out : path);
    return rc;
}
