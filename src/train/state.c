#include "train/state.h"

#include "core/err.h"

#include <inttypes.h>
#include <math.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_state_fp_set(train_state *s, const char *key, const char *fmt, ...)
{
    int i = 0;
    while (i < s->nfp && strcmp(s->fp[i].key, key) != 0) i++;
    if (i == s->nfp) {
        if (s->nfp == TRAIN_STATE_MAX_FP) return; /* a programming error, caught by the tests */
        s->nfp++;
        snprintf(s->fp[i].key, sizeof s->fp[i].key, "%s", key);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->fp[i].value, sizeof s->fp[i].value, fmt, ap);
    va_end(ap);
}

const char *train_state_fp_get(const train_state *s, const char *key)
{
    for (int i = 0; i < s->nfp; i++)
        if (!strcmp(s->fp[i].key, key)) return s->fp[i].value;
    return NULL;
}

/* JSON has no NaN or infinity: those are written as null. */
static json_t *real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *u64_hex(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
    return json_string(buf);
}

/* The numeric fields of state.json in file order: kind, key, where in
 * train_state, the least value read accepts (also written for ranks, whose
 * 0 means 1), and whether a file may lack it (older bertc versions; the
 * default is then what train_state_load set before reading). */
enum { F_INT, F_U64, F_REAL };
typedef struct {
    int kind;
    const char *key;
    size_t off;
    int64_t min;
    int optional;
} state_field;

#define SF(kind, key, field, min, optional) {kind, key, offsetof(train_state, field), min, optional}
static const state_field state_fields[] = {
    SF(F_INT, "step", step, 0, 0),
    SF(F_INT, "epoch", epoch, 0, 0),
    SF(F_INT, "loader_cursor", cursor, 0, 0),
    SF(F_U64, "shuffle_seed", shuffle_seed, 0, 0),
    SF(F_U64, "rng_seed", rng_seed, 0, 0),
    SF(F_U64, "rng_counter", rng_counter, 0, 0),
    SF(F_REAL, "loss_scale", loss_scale, 0, 0),
    /* absent before fp16 training: those runs never scaled the loss, so the
     * tracker was 0 */
    SF(F_INT, "loss_scale_growth_tracker", loss_scale_growth, 0, 1),
    SF(F_INT, "skipped_steps", skipped_steps, 0, 0),
    /* absent before bertc counted skipped steps in a row across resumes: 0 */
    SF(F_INT, "skipped_in_row", skipped_in_row, 0, 1),
    SF(F_INT, "adam_t", adam_t, 0, 0),
    SF(F_INT, "restarts", restarts, 0, 0),
    /* absent before data-parallel training: one process */
    SF(F_INT, "ranks", ranks, 1, 1),
    SF(F_REAL, "elapsed_s", elapsed_s, 0, 0),
    SF(F_REAL, "smoothed_loss", smoothed_loss, 0, 0),
    SF(F_INT, "examples_seen", examples_seen, 0, 0),
};
#undef SF

int train_state_to_json(const train_state *s, char **text, size_t *len)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string("bertc-train-state"));
    json_object_set_new(o, "format_version", json_integer(1));
    json_object_set_new(o, "bertc_version", json_string(s->version));
    for (size_t i = 0; i < sizeof state_fields / sizeof state_fields[0]; i++) {
        const state_field *f = &state_fields[i];
        const void *at = (const char *)s + f->off;
        json_t *v;
        if (f->kind == F_U64) v = u64_hex(*(const uint64_t *)at);
        else if (f->kind == F_REAL) v = real_or_null(*(const double *)at);
        else {
            int64_t x = *(const int64_t *)at;
            v = json_integer(f->min > 0 && x < f->min ? f->min : x);
        }
        json_object_set_new(o, f->key, v);
    }
    json_t *fp = json_object();
    for (int i = 0; i < s->nfp; i++) json_object_set_new(fp, s->fp[i].key, json_string(s->fp[i].value));
    json_object_set_new(o, "fingerprint", fp);
    char *dump = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!dump) return err_set(ERR_RUNTIME, "train_state_to_json: out of memory");
    size_t n = strlen(dump);
    char *out = malloc(n + 2);
    if (!out) {
        free(dump);
        return err_set(ERR_RUNTIME, "train_state_to_json: out of memory");
    }
    memcpy(out, dump, n);
    out[n] = '\n';
    out[n + 1] = 0;
    free(dump);
    *text = out;
    *len = n + 1;
    return 0;
}

static int get_int(json_t *o, const char *path, const char *key, int64_t min, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return err_set(ERR_INPUT, "%s: field \"%s\" is missing or not an integer", path, key);
    if (json_integer_value(v) < min) return err_set(ERR_INPUT, "%s: field \"%s\" is negative", path, key);
    *out = json_integer_value(v);
    return 0;
}

static int get_real(json_t *o, const char *path, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v)) return err_set(ERR_INPUT, "%s: field \"%s\" is missing or not a number", path, key);
    *out = json_number_value(v);
    return 0;
}

static int get_u64(json_t *o, const char *path, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    char *end;
    if (!s || strncmp(s, "0x", 2) != 0 || strlen(s) != 18)
        return err_set(ERR_INPUT, "%s: field \"%s\" is missing or not a 0x-prefixed 64-bit hex string", path, key);
    *out = strtoull(s + 2, &end, 16);
    if (*end) return err_set(ERR_INPUT, "%s: field \"%s\": '%s' is not hexadecimal", path, key, s);
    return 0;
}

int train_state_load(const char *path, train_state *s)
{
    memset(s, 0, sizeof *s);
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!o) return err_set(ERR_INPUT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = 0;
    const char *fmt = json_string_value(json_object_get(o, "format"));
    json_t *fp = json_object_get(o, "fingerprint");
    const char *ver = json_string_value(json_object_get(o, "bertc_version"));
    int64_t fv = 0;
    if (!json_is_object(o) || !fmt || strcmp(fmt, "bertc-train-state") != 0)
        rc = err_set(ERR_INPUT, "%s: not a bertc state.json (field \"format\")", path);
    else if ((rc = get_int(o, path, "format_version", 1, &fv)) == 0 && fv != 1)
        rc = err_set(ERR_INPUT, "%s: format_version %lld is not supported (this bertc reads 1)", path, (long long)fv);
    s->ranks = 1;
    for (size_t i = 0; !rc && i < sizeof state_fields / sizeof state_fields[0]; i++) {
        const state_field *f = &state_fields[i];
        void *at = (char *)s + f->off;
        if (f->optional && !json_object_get(o, f->key)) continue;
        if (f->kind == F_U64) rc = get_u64(o, path, f->key, at);
        else if (f->kind == F_REAL) rc = get_real(o, path, f->key, at);
        else rc = get_int(o, path, f->key, f->min, at);
        if (!rc && f->off == offsetof(train_state, skipped_in_row) && s->skipped_in_row > s->skipped_steps)
            rc = err_set(ERR_INPUT, "%s: field \"skipped_in_row\": %lld is more than skipped_steps %lld", path,
                         (long long)s->skipped_in_row, (long long)s->skipped_steps);
    }
    if (!rc && !ver) rc = err_set(ERR_INPUT, "%s: field \"bertc_version\" is missing or not a string", path);
    if (!rc) snprintf(s->version, sizeof s->version, "%s", ver);
    if (!rc && !json_is_object(fp)) rc = err_set(ERR_INPUT, "%s: field \"fingerprint\" is missing or not an object", path);
    if (!rc) {
        const char *k;
        json_t *v;
        json_object_foreach(fp, k, v)
        {
            if (!json_is_string(v)) {
                rc = err_set(ERR_INPUT, "%s: fingerprint \"%s\" is not a string", path, k);
                break;
            }
            if (s->nfp == TRAIN_STATE_MAX_FP || strlen(k) >= sizeof s->fp[0].key ||
                strlen(json_string_value(v)) >= sizeof s->fp[0].value) {
                rc = err_set(ERR_INPUT, "%s: fingerprint too large (at \"%s\")", path, k);
                break;
            }
            train_state_fp_set(s, k, "%s", json_string_value(v));
        }
    }
    json_decref(o);
    return rc;
}

int train_state_fp_compare(const train_state *saved, const train_state *now, const char *where)
{
    for (int i = 0; i < saved->nfp; i++) {
        const char *v = train_state_fp_get(now, saved->fp[i].key);
        if (!v)
            return err_set(ERR_INPUT, "%s: the run was started with %s %s, which this command does not set", where,
                           saved->fp[i].key, saved->fp[i].value);
        if (strcmp(v, saved->fp[i].value) != 0)
            return err_set(ERR_INPUT,
                           "%s holds a run with %s %s, this command has %s %s (use another --out, the same setting, or "
                           "--resume never to start over)",
                           where, saved->fp[i].key, saved->fp[i].value, saved->fp[i].key, v);
    }
    for (int i = 0; i < now->nfp; i++)
        if (!train_state_fp_get(saved, now->fp[i].key))
            return err_set(ERR_INPUT, "%s holds a run without setting %s (this command has %s); it was made by another bertc version",
                           where, now->fp[i].key, now->fp[i].value);
    return 0;
}
