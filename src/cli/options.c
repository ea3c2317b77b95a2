/* The shared option parsers (options.h). The names of devices, precisions
 * and recompute modes are looked up where their enums live (select.h,
 * memory.h); the message a bad value gets is this file's, in the form
 * args_parse gives every other bad value ("train --lr: 'x' is not ..."). */
#include "cli/options.h"

#include "core/alloc.h"
#include "core/apikey.h"
#include "core/err.h"
#include "model/memory.h"
#include "train/pipeline.h"

#include <errno.h>
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

int cli_parse_run(const char *cmd, const char *usage, const arg_spec *specs, int argc, char **argv, const char **run)
{
    char **pos = NULL;
    int npos = 0;
    *run = NULL;
    int rc = args_parse(cmd, usage, specs, argc, argv, &pos, &npos);
    if (!rc && npos != 1)
        rc = err_set(ERR_INPUT, "%s: expected one run directory, got %d argument(s) (usage: bertc %s RUN)", cmd, npos,
                     cmd);
    if (!rc) *run = pos[0];
    free(pos);
    return rc;
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

/* The first line of PATH, the key, into buf (room for APIKEY_MAX + 1):
 * trailing CR/LF dropped; what else it holds is apikey_valid's to judge. */
static int read_key_file(const char *cmd, const char *path, char *buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_INPUT, "%s --api-key-file %s: cannot open it: %s", cmd, path, strerror(errno));
    /* Two bytes more than a key may hold: its line break (CR LF) still fits. */
    char tmp[APIKEY_MAX + 3];
    size_t got = fread(tmp, 1, sizeof tmp, f);
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad) return err_set(ERR_INPUT, "%s --api-key-file %s: cannot read it: %s", cmd, path, strerror(e));
    while (got && (tmp[got - 1] == '\n' || tmp[got - 1] == '\r')) got--;
    if (got == 0)
        return err_set(ERR_INPUT, "%s --api-key-file %s: the file holds no key (write one in it, e.g. openssl rand "
                       "-hex 32 > %s)", cmd, path, path);
    if (got > APIKEY_MAX)
        return err_set(ERR_INPUT, "%s --api-key-file %s: not a usable API key: over the limit of %d bytes", cmd, path,
                       APIKEY_MAX);
    char why[160];
    if (apikey_valid(tmp, got, why, sizeof why))
        return err_set(ERR_INPUT, "%s --api-key-file %s: not a usable API key: %s", cmd, path, why);
    memcpy(buf, tmp, got);
    buf[got] = 0;
    *n = got;
    memset(tmp, 0, sizeof tmp);
    return 0;
}

int cli_api_key(const char *cmd, const cli_api_key_opts *a, char **key, const char **source)
{
    const char *unused;
    if (!source) source = &unused;
    *key = NULL;
    *source = NULL;
    if (a->key && a->file)
        return err_set(ERR_INPUT, "%s: --api-key and --api-key-file both give a key; give one of them", cmd);
    char why[160];
    if (a->file) {
        char buf[APIKEY_MAX + 1];
        size_t n;
        int rc = read_key_file(cmd, a->file, buf, &n);
        if (rc) return rc;
        *key = xstrdup(buf);
        memset(buf, 0, sizeof buf);
        *source = "--api-key-file";
        return 0;
    }
    const char *env = getenv(CLI_API_KEY_ENV);
    const char *s = a->key ? a->key : env;
    if (!s) return 0;
    const char *from = a->key ? "--api-key" : CLI_API_KEY_ENV;
    if (!a->key && !*env)
        return err_set(ERR_INPUT, "%s: %s is set but empty (unset it to run without a key)", cmd, CLI_API_KEY_ENV);
    if (apikey_valid(s, strlen(s), why, sizeof why))
        return err_set(ERR_INPUT, "%s %s: not a usable API key: %s", cmd, from, why);
    *key = xstrdup(s);
    *source = from;
    return 0;
}

void cli_warn_open_bind(const char *what, const char *bind, int have_key)
{
    if (have_key || apikey_is_loopback(bind)) return;
    log_warn("%s %s listens beyond this machine with no API key: anyone who can reach the port can use it "
             "(--api-key-file PATH or %s sets one)", what, bind, CLI_API_KEY_ENV);
}
