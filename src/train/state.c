#include "train/state.h"

#include "core/err.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <jansson.h>
#include <stdarg.h>
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

/* The fields of state.json besides format, version and fingerprint, in
 * the order they are written and read. */
typedef enum { F_INT, F_U64, F_REAL } field_kind;
typedef enum {
    F_ALWAYS,   /* written, and required when read */
    F_OLDER,    /* written; absent in the state.json of older bertc versions: `absent` */
    F_WHEN_SET, /* written when not `absent` (a run's state.json stays as it was without the feature) */
} field_presence;
typedef struct {
    const char *key;
    field_kind kind;
    size_t off;
    int64_t min;     /* F_INT: the least value read */
    field_presence presence;
    int64_t absent;  /* F_INT: the value when absent */
} state_field;
#define FIELD(key, kind, member, min, presence, absent) {key, kind, offsetof(train_state, member), min, presence, absent}
static const state_field fields[] = {
    FIELD("step", F_INT, step, 0, F_ALWAYS, 0),
    FIELD("epoch", F_INT, epoch, 0, F_ALWAYS, 0),
    FIELD("loader_cursor", F_INT, cursor, 0, F_ALWAYS, 0),
    FIELD("shuffle_seed", F_U64, shuffle_seed, 0, F_ALWAYS, 0),
    FIELD("rng_seed", F_U64, rng_seed, 0, F_ALWAYS, 0),
    FIELD("rng_counter", F_U64, rng_counter, 0, F_ALWAYS, 0),
    FIELD("loss_scale", F_REAL, loss_scale, 0, F_ALWAYS, 0),
    /* before fp16 training: the loss was never scaled, the tracker 0 */
    FIELD("loss_scale_growth_tracker", F_INT, loss_scale_growth, 0, F_OLDER, 0),
    FIELD("skipped_steps", F_INT, skipped_steps, 0, F_ALWAYS, 0),
    /* before skipped steps in a row were counted across resumes: 0 */
    FIELD("skipped_in_row", F_INT, skipped_in_row, 0, F_OLDER, 0),
    FIELD("adam_t", F_INT, adam_t, 0, F_ALWAYS, 0),
    FIELD("restarts", F_INT, restarts, 0, F_ALWAYS, 0),
    /* before data-parallel training: one process */
    FIELD("ranks", F_INT, ranks, 1, F_OLDER, 1),
    FIELD("shard_optimizer", F_INT, shard_optimizer, 0, F_WHEN_SET, 0),
    FIELD("pipeline_stages", F_INT, stages, 1, F_WHEN_SET, 1),
    FIELD("elapsed_s", F_REAL, elapsed_s, 0, F_ALWAYS, 0),
    FIELD("smoothed_loss", F_REAL, smoothed_loss, 0, F_ALWAYS, 0),
    FIELD("examples_seen", F_INT, examples_seen, 0, F_ALWAYS, 0),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static void put_field(json_t *o, const train_state *s, const state_field *f)
{
    const char *p = (const char *)s + f->off;
    if (f->kind == F_U64) {
        json_object_set_new(o, f->key, u64_hex(*(const uint64_t *)p));
    } else if (f->kind == F_REAL) {
        json_object_set_new(o, f->key, real_or_null(*(const double *)p));
    } else {
        int64_t v = *(const int64_t *)p;
        /* what its absence means, where that is more than 0 (the ranks of a
         * state never laid out: one process) */
        if (f->presence != F_ALWAYS && v <= 0 && f->absent > 0) v = f->absent;
        if (f->presence == F_WHEN_SET && v <= f->absent) return;
        json_object_set_new(o, f->key, json_integer(v));
    }
}

int train_state_to_json(const train_state *s, char **text, size_t *len)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string("bertc-train-state"));
    json_object_set_new(o, "format_version", json_integer(1));
    json_object_set_new(o, "bertc_version", json_string(s->version));
    for (size_t i = 0; i < NFIELDS; i++) put_field(o, s, &fields[i]);
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

static int get_field(json_t *o, const char *path, train_state *s, const state_field *f)
{
    char *p = (char *)s + f->off;
    if (f->kind == F_U64) return get_u64(o, path, f->key, (uint64_t *)p);
    if (f->kind == F_REAL) return get_real(o, path, f->key, (double *)p);
    *(int64_t *)p = f->absent;
    if (f->presence != F_ALWAYS && !json_object_get(o, f->key)) return 0;
    return get_int(o, path, f->key, f->min, (int64_t *)p);
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
    for (size_t i = 0; i < NFIELDS && !rc; i++) rc = get_field(o, path, s, &fields[i]);
    if (!rc && s->skipped_in_row > s->skipped_steps)
        rc = err_set(ERR_INPUT, "%s: field \"skipped_in_row\": %lld is more than skipped_steps %lld", path,
                     (long long)s->skipped_in_row, (long long)s->skipped_steps);
    if (!rc && s->shard_optimizer > 1)
        rc = err_set(ERR_INPUT, "%s: field \"shard_optimizer\": %lld is not 0 or 1", path, (long long)s->shard_optimizer);
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
