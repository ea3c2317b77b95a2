#include "args.h"
#include "alloc.h"
#include "err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int parse_int64(const char *s, int64_t min, int64_t max, const char *what, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE)
        return err_set(ERR_INPUT, "%s: '%s' is not an integer%s", what, s, errno == ERANGE ? " in range" : "");
    if (v < min || v > max) return err_set(ERR_INPUT, "%s: %s is out of range [%lld, %lld]", what, s, (long long)min, (long long)max);
    *out = v;
    return 0;
}

int parse_double(const char *s, double min, double max, const char *what, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return err_set(ERR_INPUT, "%s: '%s' is not a finite number", what, s);
    if ((min != 0 || max != 0) && (v < min || v > max))
        return err_set(ERR_INPUT, "%s: %s is out of range [%g, %g]", what, s, min, max);
    *out = v;
    return 0;
}

int parse_size(const char *s, const char *what, int64_t *out)
{
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"KiB", 1024.0}, {"M", 1e6}, {"MB", 1e6},
        {"MiB", 1048576.0}, {"G", 1e9}, {"GB", 1e9}, {"GiB", 1073741824.0}, {"T", 1e12}, {"TB", 1e12},
        {"TiB", 1099511627776.0},
    };
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
        return err_set(ERR_INPUT, "%s: '%s' is not a size (e.g. 16GiB, 512MiB)", what, s);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) != 0) continue;
        double bytes = v * units[i].mult;
        if (bytes > 9.0e18) return err_set(ERR_INPUT, "%s: '%s' is too large", what, s);
        *out = (int64_t)bytes;
        return 0;
    }
    return err_set(ERR_INPUT, "%s: '%s' has an unknown unit (use B, KiB, MiB, GiB, KB, MB, GB)", what, s);
}

static const char *type_hint(const arg_spec *a)
{
    switch (a->type) {
    case ARG_INT: case ARG_I64: return "N";
    case ARG_DOUBLE: return "X";
    case ARG_SIZE: return "SIZE";
    case ARG_STR: return "VALUE";
    default: return NULL;
    }
}

void args_print_help(const char *usage, const arg_spec *specs)
{
    printf("usage: %s\n", usage);
    int any = 0;
    for (const arg_spec *a = specs; a->name; a++) any = 1;
    if (!any) return;
    printf("\noptions:\n");
    for (const arg_spec *a = specs; a->name; a++) {
        char left[96];
        const char *mv = a->metavar ? a->metavar : type_hint(a);
        if (mv) snprintf(left, sizeof left, "--%s %s", a->name, mv);
        else snprintf(left, sizeof left, "--%s", a->name);
        printf("  %-28s %s", left, a->help ? a->help : "");
        if (a->required) printf(" (required)");
        /* A help text that states its own default, and a required option, get no automatic one. */
        int says_default = a->help && strstr(a->help, "default") != NULL;
        if (!a->required && !says_default) switch (a->type) {
        case ARG_INT: printf(" [default %d]", *(int *)a->ptr); break;
        case ARG_I64: printf(" [default %lld]", (long long)*(int64_t *)a->ptr); break;
        case ARG_DOUBLE: printf(" [default %g]", *(double *)a->ptr); break;
        case ARG_STR: if (*(const char **)a->ptr) printf(" [default %s]", *(const char **)a->ptr); break;
        default: break;
        }
        printf("\n");
    }
    printf("  %-28s %s\n", "--help", "print this help and exit");
}

static int set_value(const char *cmd, const arg_spec *a, const char *val)
{
    char what[128];
    snprintf(what, sizeof what, "%s --%s", cmd, a->name);
    int64_t i;
    double d;
    int rc;
    int ranged = a->min != 0 || a->max != 0;
    switch (a->type) {
    case ARG_INT:
        rc = parse_int64(val, ranged ? (int64_t)a->min : -2147483647 - 1, ranged ? (int64_t)a->max : 2147483647, what, &i);
        if (!rc) *(int *)a->ptr = (int)i;
        return rc;
    case ARG_I64:
        rc = parse_int64(val, ranged ? (int64_t)a->min : INT64_MIN, ranged ? (int64_t)a->max : INT64_MAX, what, &i);
        if (!rc) *(int64_t *)a->ptr = i;
        return rc;
    case ARG_DOUBLE:
        rc = parse_double(val, a->min, a->max, what, &d);
        if (!rc) *(double *)a->ptr = d;
        return rc;
    case ARG_SIZE:
        rc = parse_size(val, what, &i);
        if (!rc) *(int64_t *)a->ptr = i;
        return rc;
    case ARG_STR:
        if (!*val) return err_set(ERR_INPUT, "%s: empty value", what);
        *(const char **)a->ptr = val;
        return 0;
    default:
        return err_set(ERR_INPUT, "%s: takes no value", what);
    }
}

int args_parse(const char *cmd, const char *usage, const arg_spec *specs, int argc, char **argv,
               char ***positional, int *npositional)
{
    char **pos = xcalloc((size_t)argc + 1, sizeof *pos);
    int npos = 0, only_pos = 0;
    for (int k = 1; k < argc; k++) {
        const char *arg = argv[k];
        if (only_pos || arg[0] != '-' || arg[1] == 0) {
            pos[npos++] = argv[k];
            continue;
        }
        if (!strcmp(arg, "--")) {
            only_pos = 1;
            continue;
        }
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            args_print_help(usage, specs);
            free(pos);
            return ARGS_HELP;
        }
        if (arg[1] != '-') {
            free(pos);
            return err_set(ERR_INPUT, "%s: unknown option '%s' (options are long: --name value; see --help)", cmd, arg);
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const arg_spec *a = specs;
        for (; a->name; a++)
            if (strlen(a->name) == nlen && !strncmp(a->name, name, nlen)) break;
        if (!a->name) {
            free(pos);
            return err_set(ERR_INPUT, "%s: unknown option '--%.*s' (see bertc %s --help)", cmd, (int)nlen, name, cmd);
        }
        int rc;
        if (a->type == ARG_FLAG || a->type == ARG_FLAG_OFF) {
            if (eq) {
                free(pos);
                return err_set(ERR_INPUT, "%s: option '--%s' takes no value", cmd, a->name);
            }
            *(int *)a->ptr = a->type == ARG_FLAG;
            rc = 0;
        } else {
            const char *val = eq ? eq + 1 : NULL;
            if (!val) {
                if (k + 1 >= argc) {
                    free(pos);
                    return err_set(ERR_INPUT, "%s: option '--%s' needs a value", cmd, a->name);
                }
                val = argv[++k];
            }
            rc = set_value(cmd, a, val);
        }
        if (rc) {
            free(pos);
            return rc;
        }
        if (a->seen) *a->seen = 1;
    }
    for (const arg_spec *a = specs; a->name; a++) {
        if (!a->required) continue;
        int missing = a->type == ARG_STR ? *(const char **)a->ptr == NULL : (a->seen && !*a->seen);
        if (missing) {
            free(pos);
            return err_set(ERR_INPUT, "%s: missing required option --%s (see bertc %s --help)", cmd, a->name, cmd);
        }
    }
    if (positional) {
        *positional = pos;
        *npositional = npos;
    } else {
        if (npos) {
            err_set(ERR_INPUT, "%s: unexpected argument '%s' (see bertc %s --help)", cmd, pos[0], cmd);
            free(pos);
            return ERR_INPUT;
        }
        free(pos);
    }
    return 0;
}
