/* The shared option parsers (options.h). The names of devices, precisions
 * and recompute modes are looked up where their enums live (select.h,
 * memory.h); the message a bad value gets is this file's, in the form
 * args_parse gives every other bad value ("train --lr: 'x' is not ..."). */
#include "cli/options.h"

#include "core/err.h"
#include "model/memory.h"
#include "train/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_device(const char *cmd, const char *s, device_kind *out)
{
    if (select_parse_device(s, out) == 0) return 0;
    return err_set(ERR_INPUT, "%s --device: '%s' is not one of auto, cpu, cuda", cmd, s ? s : "(null)");
}

int cli_parse_precision(const char *cmd, const char *s, precision_kind *out)
{
    if (select_parse_precision(s, out) == 0 && *out != PREC_INT8) return 0;
    if (s && !strcmp(s, "int8"))
        return err_set(ERR_INPUT, "%s --precision int8: int8 is for answers (predict, ask, serve, run_squad "
                                  "--predict_precision, train --eval-precision)", cmd);
    return err_set(ERR_INPUT, "%s --precision: '%s' is not one of auto, fp32, tf32, fp16, bf16", cmd,
                   s ? s : "(null)");
}

int cli_parse_answer_precision(const char *opt, const char *s, precision_kind *out)
{
    if (select_parse_precision(s, out) == 0) return 0;
    return err_set(ERR_INPUT, "%s: '%s' is not one of auto, fp32, tf32, fp16, bf16, int8", opt, s ? s : "(null)");
}

int cli_parse_recompute(const char *cmd, const char *s, recompute_kind *out)
{
    if (memory_parse_recompute(s, out) == 0) return 0;
    return err_set(ERR_INPUT, "%s --recompute: '%s' is not one of none, layer", cmd, s ? s : "(null)");
}

int cli_parse_packing(const char *cmd, const char *s, packing_kind *out)
{
    if (s && !strcmp(s, "none")) *out = PACKING_NONE;
    else if (s && !strcmp(s, "varlen")) *out = PACKING_VARLEN;
    else return err_set(ERR_INPUT, "%s --packing %s: expected none or varlen", cmd, s ? s : "(null)");
    return 0;
}

const char *cli_packing_name(packing_kind p)
{
    return p == PACKING_VARLEN ? "varlen" : "none";
}

void cli_parse_resume(const char *s, resume_kind *out, const char **path)
{
    *path = NULL;
    if (!strcmp(s, "auto")) *out = RESUME_AUTO;
    else if (!strcmp(s, "never")) *out = RESUME_NEVER;
    else {
        *out = RESUME_PATH;
        *path = s;
    }
}

int cli_check_window(const char *cmd, const cli_window *w)
{
    if ((w->T_given || w->stride_given) && w->stride >= w->T)
        return err_set(ERR_INPUT, "%s: --doc-stride %d must be below --max-seq-length %d", cmd, w->stride, w->T);
    return 0;
}

int cli_answer_backend_opts(const char *cmd, const cli_device *d, int threads, backend_opts *out)
{
    *out = backend_opts_default();
    char opt[64];
    snprintf(opt, sizeof opt, "%s --precision", cmd);
    int rc;
    if ((rc = cli_parse_device(cmd, d->device, &out->device)) || (rc = cli_parse_answer_precision(opt, d->precision, &out->precision)))
        return rc;
    out->threads = threads;
    out->gpu = d->gpu;
    out->batch_invariant = 1;
    return 0;
}

int cli_parse_run(const char *cmd, const char *usage, const arg_spec *specs, int argc, char **argv, char ***pos)
{
    int npos = 0;
    *pos = NULL;
    int rc = args_parse(cmd, usage, specs, argc, argv, pos, &npos);
    if (rc) return rc;
    if (npos != 1) {
        free(*pos);
        *pos = NULL;
        return err_set(ERR_INPUT, "%s: expected one run directory, got %d argument(s) (usage: bertc %s RUN)", cmd, npos,
                       cmd);
    }
    return 0;
}

int cli_parse_pipeline_split(const char *cmd, const char *s, int stages, int *split, int *n)
{
    char opt[64];
    snprintf(opt, sizeof opt, "%s --pipeline-split", cmd);
    if (stages < 2) return err_set(ERR_INPUT, "%s %s: needs --pipeline-stages 2 or more", opt, s);
    int rc = pipe_split_parse(s, split, PIPE_MAX_STAGES + 1, n, opt);
    if (rc) return rc;
    if (*n != stages + 1)
        return err_set(ERR_INPUT, "%s %s: %d boundaries for %d stages (give %d: 0, ..., the layer count)", opt, s, *n,
                       stages, stages + 1);
    return 0;
}
