/* SQuAD-format JSON -> examples (squad.h).
 *
 * The whole file is read once (its bytes are hashed for the features cache)
 * and parsed with Jansson, whose errors carry line:column. Every field is
 * checked where it is read; a message names the file, the question id (or
 * the article/paragraph/question index when there is no usable id) and the
 * field. Contexts are stored once and shared by their questions. */
#define _GNU_SOURCE /* memmem */
#include "data/squad.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A JSON value's type, as the messages about a SQuAD file name it. */
static const char *const type_names[] = {
    [JSON_OBJECT] = "object", [JSON_ARRAY] = "array", [JSON_STRING] = "string", [JSON_INTEGER] = "integer",
    [JSON_REAL] = "number", [JSON_TRUE] = "boolean", [JSON_FALSE] = "boolean", [JSON_NULL] = "null"};
static const char *json_kind(const json_t *v) { return type_names[json_typeof(v)]; }

/* Where we are in the file, for messages. */
typedef struct {
    const char *path;
    int article, paragraph, question; /* -1 when not inside one */
    const char *id;                   /* question id once known */
} squad_where;

static int where_fail(const squad_where *w, const char *field, const char *fmt, const char *a)
{
    char place[256];
    if (w->id)
        snprintf(place, sizeof place, "question \"%.120s\"", w->id);
    else if (w->question >= 0)
        snprintf(place, sizeof place, "data[%d].paragraphs[%d].qas[%d]", w->article, w->paragraph, w->question);
    else if (w->paragraph >= 0)
        snprintf(place, sizeof place, "data[%d].paragraphs[%d]", w->article, w->paragraph);
    else if (w->article >= 0)
        snprintf(place, sizeof place, "data[%d]", w->article);
    else
        snprintf(place, sizeof place, "top level");
    char what[256];
    snprintf(what, sizeof what, fmt, a);
    return err_set(ERR_INPUT, "%s: %s: field \"%s\": %s", w->path, place, field, what);
}

/* Fetches obj[key] with the wanted type; missing or mistyped is an error. */
static int get_field(const squad_where *w, const json_t *obj, const char *key, json_type type, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return where_fail(w, key, "%s", "missing");
    int ok = json_typeof(v) == type || (type == JSON_TRUE && json_typeof(v) == JSON_FALSE);
    if (!ok) {
        const char *want = type == JSON_ARRAY ? "an array" : type == JSON_STRING ? "a string"
                         : type == JSON_INTEGER ? "an integer" : type == JSON_OBJECT ? "an object" : "a boolean";
        char msg[96];
        snprintf(msg, sizeof msg, "expected %s, got %s", want, json_kind(v));
        return where_fail(w, key, "%s", msg);
    }
    *out = v;
    return 0;
}

/* Byte offset of each code point of valid UTF-8 (Jansson guarantees that). */
static int context_index(squad_context *c, const squad_where *w)
{
    int ncp = 0;
    for (size_t i = 0; i < c->nbytes; i++) ncp += ((unsigned char)c->text[i] & 0xC0) != 0x80;
    if (c->nbytes > (size_t)INT32_MAX - 1) return where_fail(w, "context", "%s", "longer than 2 GiB");
    c->ncp = ncp;
    c->cp_byte = malloc(((size_t)ncp + 1) * sizeof *c->cp_byte);
    if (!c->cp_byte) return err_set(ERR_RUNTIME, "%s: out of memory indexing a context", w->path);
    int k = 0;
    for (size_t i = 0; i < c->nbytes; i++)
        if (((unsigned char)c->text[i] & 0xC0) != 0x80) c->cp_byte[k++] = (int32_t)i;
    c->cp_byte[ncp] = (int32_t)c->nbytes;
    return 0;
}

static int utf8_ncp(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Code point index of a byte offset that is a character boundary. */
static int cp_of_byte(const squad_context *c, size_t byte)
{
    int lo = 0, hi = c->ncp;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if ((size_t)c->cp_byte[mid] < byte) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Returns the answer's code point start: `start` when the text is there,
 * else the nearest occurrence (ties: the earlier one), else -1. *moved is
 * set when it differs from the file's value. */
static int answer_locate(const squad_context *c, const char *text, size_t tlen, long long start, int *moved)
{
    *moved = 0;
    if (tlen == 0) return -1;
    int tcp = utf8_ncp(text, tlen);
    if (start >= 0 && start + tcp <= c->ncp) {
        size_t b = (size_t)c->cp_byte[start];
        if (b + tlen <= c->nbytes && memcmp(c->text + b, text, tlen) == 0) return (int)start;
    }
    int best = -1;
    long long best_d = 0;
    const char *p = c->text, *end = c->text + c->nbytes;
    while ((size_t)(end - p) >= tlen) {
        const char *hit = memmem(p, (size_t)(end - p), text, tlen);
        if (!hit) break;
        /* A match of valid UTF-8 inside valid UTF-8 starts on a boundary. */
        int cp = cp_of_byte(c, (size_t)(hit - c->text));
        long long d = cp > start ? cp - start : start - cp;
        if (best < 0 || d < best_d) {
            best = cp;
            best_d = d;
        }
        if (cp >= start) break; /* later hits are only farther */
        p = hit + 1;
    }
    if (best >= 0) *moved = 1;
    return best;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int check_unique_ids(const char *path, const squad_data *d)
{
    if (d->n < 2) return 0;
    char **ids = malloc((size_t)d->n * sizeof *ids);
    if (!ids) return err_set(ERR_RUNTIME, "%s: out of memory", path);
    for (int i = 0; i < d->n; i++) ids[i] = d->ex[i].id;
    qsort(ids, (size_t)d->n, sizeof *ids, str_cmp);
    int rc = 0;
    for (int i = 1; i < d->n && !rc; i++)
        if (!strcmp(ids[i - 1], ids[i]))
            rc = err_set(ERR_INPUT, "%s: question \"%.120s\": duplicate question id", path, ids[i]);
    free(ids);
    return rc;
}

static int load_answers(const squad_where *w, const json_t *qa, const squad_context *c, squad_example *e,
                        squad_data *d)
{
    json_t *answers;
    int rc = get_field(w, qa, "answers", JSON_ARRAY, &answers);
    if (rc) return rc;
    size_t na = json_array_size(answers);
    if (na > (size_t)INT32_MAX / 2) return where_fail(w, "answers", "%s", "too many answers");
    e->n_answers = (int)na;
    e->answer_text = xcalloc(na ? na : 1, sizeof *e->answer_text);
    e->answer_start = xcalloc(na ? na : 1, sizeof *e->answer_start);
    for (size_t k = 0; k < na; k++) {
        json_t *a = json_array_get(answers, k), *t, *s;
        char field[64];
        snprintf(field, sizeof field, "answers[%zu]", k);
        if (!json_is_object(a)) return where_fail(w, field, "expected an object, got %s", json_kind(a));
        snprintf(field, sizeof field, "answers[%zu].text", k);
        if (!(t = json_object_get(a, "text"))) return where_fail(w, field, "%s", "missing");
        if (!json_is_string(t)) return where_fail(w, field, "expected a string, got %s", json_kind(t));
        snprintf(field, sizeof field, "answers[%zu].answer_start", k);
        if (!(s = json_object_get(a, "answer_start"))) return where_fail(w, field, "%s", "missing");
        if (!json_is_integer(s)) return where_fail(w, field, "expected an integer, got %s", json_kind(s));
        e->answer_text[k] = xstrdup(json_string_value(t));
        int moved;
        long long given = (long long)json_integer_value(s);
        if (given > INT32_MAX || given < -INT32_MAX) given = given > 0 ? INT32_MAX : -INT32_MAX; /* no overflow in answer_locate; same nearest match */
        e->answer_start[k] = answer_locate(c, e->answer_text[k], json_string_length(t), given, &moved);
        if (e->answer_start[k] < 0) d->n_unfound++;
        else if (moved) d->n_relocated++;
        if (e->answer_start[k] >= 0 && e->train_answer < 0) e->train_answer = (int)k;
    }
    return 0;
}

static int load_question(squad_where *w, const json_t *qa, int ctx, squad_data *d)
{
    squad_example *e = &d->ex[d->n];
    memset(e, 0, sizeof *e);
    e->context = ctx;
    e->train_answer = -1;
    d->n++; /* counted now so squad_free releases what is filled below */
    if (!json_is_object(qa)) return where_fail(w, "qas", "expected objects, got %s", json_kind(qa));
    json_t *v;
    int rc = get_field(w, qa, "id", JSON_STRING, &v);
    if (rc) return rc;
    e->id = xstrdup(json_string_value(v));
    w->id = e->id;
    if ((rc = get_field(w, qa, "question", JSON_STRING, &v))) return rc;
    e->question = xstrdup(json_string_value(v));
    json_t *imp = json_object_get(qa, "is_impossible");
    if (imp) {
        if (!json_is_boolean(imp)) return where_fail(w, "is_impossible", "expected a boolean, got %s", json_kind(imp));
        e->is_impossible = json_is_true(imp);
    }
    return load_answers(w, qa, &d->contexts[ctx], e, d);
}

/* Counts paragraphs and questions so the arrays are allocated once. */
static int count_items(squad_where *w, const json_t *data, size_t *nctx, size_t *nq)
{
    *nctx = *nq = 0;
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *art = json_array_get(data, i), *pars, *qas;
        w->article = (int)i;
        if (!json_is_object(art)) return where_fail(w, "data", "expected objects, got %s", json_kind(art));
        int rc = get_field(w, art, "paragraphs", JSON_ARRAY, &pars);
        if (rc) return rc;
        for (size_t j = 0; j < json_array_size(pars); j++) {
            json_t *p = json_array_get(pars, j);
            w->paragraph = (int)j;
            if (!json_is_object(p)) return where_fail(w, "paragraphs", "expected objects, got %s", json_kind(p));
            if ((rc = get_field(w, p, "qas", JSON_ARRAY, &qas))) return rc;
            *nq += json_array_size(qas);
            (*nctx)++;
        }
        w->paragraph = -1;
    }
    w->article = -1;
    if (*nq > (size_t)INT32_MAX / 4 || *nctx > (size_t)INT32_MAX / 4) return where_fail(w, "data", "%s", "too many items");
    return 0;
}

static int load_tree(const char *path, const json_t *root, squad_data *d)
{
    squad_where w = {path, -1, -1, -1, NULL};
    if (!json_is_object(root)) return err_set(ERR_INPUT, "%s: top level: expected an object, got %s", path, json_kind(root));
    json_t *ver = json_object_get(root, "version"), *data;
    d->version = xstrdup(json_is_string(ver) ? json_string_value(ver) : "");
    int rc = get_field(&w, root, "data", JSON_ARRAY, &data);
    if (rc) return rc;
    size_t nctx, nq;
    if ((rc = count_items(&w, data, &nctx, &nq))) return rc;
    d->contexts = calloc(nctx ? nctx : 1, sizeof *d->contexts);
    d->ex = calloc(nq ? nq : 1, sizeof *d->ex);
    if (!d->contexts || !d->ex) return err_set(ERR_RUNTIME, "%s: out of memory for %zu questions", path, nq);
    for (size_t i = 0; i < json_array_size(data); i++) {
        json_t *pars = json_object_get(json_array_get(data, i), "paragraphs");
        w.article = (int)i;
        for (size_t j = 0; j < json_array_size(pars); j++) {
            json_t *p = json_array_get(pars, j), *ctx, *qas = json_object_get(p, "qas");
            w.paragraph = (int)j;
            w.question = -1;
            w.id = NULL;
            if ((rc = get_field(&w, p, "context", JSON_STRING, &ctx))) return rc;
            squad_context *c = &d->contexts[d->ncontexts++];
            c->nbytes = json_string_length(ctx);
            c->text = xmalloc(c->nbytes + 1);
            memcpy(c->text, json_string_value(ctx), c->nbytes + 1);
            if ((rc = context_index(c, &w))) return rc;
            for (size_t k = 0; k < json_array_size(qas); k++) {
                w.question = (int)k;
                w.id = NULL;
                if ((rc = load_question(&w, json_array_get(qas, k), d->ncontexts - 1, d))) return rc;
            }
        }
    }
    return check_unique_ids(path, d);
}

int squad_load(const char *path, squad_data *out)
{
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    int rc = file_read_all(path, &buf, &len);
    if (rc) return rc;
    out->hash = hash64(buf, len, HASH64_INIT);
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, 0, &jerr);
    free(buf);
    if (!root) return err_set(ERR_INPUT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    rc = load_tree(path, root, out);
    json_decref(root);
    if (rc) squad_free(out);
    return rc;
}

void squad_free(squad_data *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        squad_example *e = &d->ex[i];
        free(e->id);
        free(e->question);
        for (int k = 0; k < e->n_answers; k++)
            if (e->answer_text) free(e->answer_text[k]);
        free(e->answer_text);
        free(e->answer_start);
    }
    for (int i = 0; i < d->ncontexts; i++) {
        free(d->contexts[i].text);
        free(d->contexts[i].cp_byte);
    }
    free(d->ex);
    free(d->contexts);
    free(d->version);
    memset(d, 0, sizeof *d);
}
