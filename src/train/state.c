#include "train/state.h"

#include "core/err.h"

#include <inttypes.h>
#include <math.h>
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

int train_state_to_json(const train_state *s, char **text, size_t *len)
{
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string("bertc-train-state"));
    json_object_set_new(o, "format_version", json_integer(1));
    json_object_set_new(o, "bertc_version", json_string(s->version));
    json_object_set_new(o, "step", json_integer(s->step));
    json_object_set_new(o, "epoch", json_integer(s->epoch));
    json_object_set_new(o, "loader_cursor", json_integer(s->cursor));
    json_object_set_new(o, "shuffle_seed", u64_hex(s->shuffle_seed));
    json_object_set_new(o, "rng_seed", u64_hex(s->rng_seed));
    json_object_set_new(o, "rng_counter", u64_hex(s->rng_counter));
    json_object_set_new(o, "loss_scale", real_or_null(s->loss_scale));
    json_object_set_new(o, "loss_scale_growth_tracker", json_integer(s->loss_scale_growth));
    json_object_set_new(o, "skipped_steps", json_integer(s->skipped_steps));
    json_object_set_new(o, "skipped_in_row", json_integer(s->skipped_in_row));
    json_object_set_new(o, "adam_t", json_integer(s->adam_t));
    json_object_set_new(o, "restarts", json_integer(s->restarts));
    json_object_set_new(o, "ranks", json_integer(s->ranks > 0 ? s->ranks : 1));
    /* only when on: an unsharded run's state.json stays as it was */
    if (s->shard_optimizer) json_object_set_new(o, "shard_optimizer", json_integer(1));
    if (s->stages > 1) json_object_set_new(o, "pipeline_stages", json_integer(s->stages));
    json_object_set_new(o, "elapsed_s", real_or_null(s->elapsed_s));
    json_object_set_new(o, "smoothed_loss", real_or_null(s->smoothed_loss));
    json_object_set_new(o, "examples_seen", json_integer(s->examples_seen));
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
    if (!rc) rc = get_int(o, path, "step", 0, &s->step);
    if (!rc) rc = get_int(o, path, "epoch", 0, &s->epoch);
    if (!rc) rc = get_int(o, path, "loader_cursor", 0, &s->cursor);
    if (!rc) rc = get_u64(o, path, "shuffle_seed", &s->shuffle_seed);
    if (!rc) rc = get_u64(o, path, "rng_seed", &s->rng_seed);
    if (!rc) rc = get_u64(o, path, "rng_counter", &s->rng_counter);
    if (!rc) rc = get_real(o, path, "loss_scale", &s->loss_scale);
    /* Absent in the state.json of bertc versions before fp16 training: their
     * runs never scaled the loss, so the tracker was 0. */
    if (!rc && json_object_get(o, "loss_scale_growth_tracker"))
        rc = get_int(o, path, "loss_scale_growth_tracker", 0, &s->loss_scale_growth);
    if (!rc) rc = get_int(o, path, "skipped_steps", 0, &s->skipped_steps);
    /* Absent before bertc counted skipped steps in a row across resumes: 0. */
    if (!rc && json_object_get(o, "skipped_in_row")) rc = get_int(o, path, "skipped_in_row", 0, &s->skipped_in_row);
    if (!rc && s->skipped_in_row > s->skipped_steps)
        rc = err_set(ERR_INPUT, "%s: field \"skipped_in_row\": %lld is more than skipped_steps %lld", path,
                     (long long)s->skipped_in_row, (long long)s->skipped_steps);
    if (!rc) rc = get_int(o, path, "adam_t", 0, &s->adam_t);
    if (!rc) rc = get_int(o, path, "restarts", 0, &s->restarts);
    /* Absent before data-parallel training: one process. */
    s->ranks = 1;
    if (!rc && json_object_get(o, "ranks")) rc = get_int(o, path, "ranks", 1, &s->ranks);
    s->shard_optimizer = 0;
    if (!rc && json_object_get(o, "shard_optimizer")) rc = get_int(o, path, "shard_optimizer", 0, &s->shard_optimizer);
    if (!rc && s->shard_optimizer > 1)
        rc = err_set(ERR_INPUT, "%s: field \"shard_optimizer\": %lld is not 0 or 1", path, (long long)s->shard_optimizer);
    /* Absent: no pipeline. */
    s->stages = 1;
    if (!rc && json_object_get(o, "pipeline_stages")) rc = get_int(o, path, "pipeline_stages", 1, &s->stages);
    if (!rc) rc = get_real(o, path, "elapsed_s", &s->elapsed_s);
    if (!rc) rc = get_real(o, path, "smoothed_loss", &s->smoothed_loss);
    if (!rc) rc = get_int(o, path, "examples_seen", 0, &s->examples_seen);
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
