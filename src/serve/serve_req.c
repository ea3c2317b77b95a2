/* POST /v1/answer bodies -> serve_req (see serve_req.h). */
#include "serve/serve_req.h"

#include "core/alloc.h"
#include "infer/adhoc.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *msg, size_t msgsz, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msgsz, fmt, ap);
    va_end(ap);
    /* One line of valid UTF-8, whatever Jansson quoted from the body or where vsnprintf cut it. */
    size_t n = strlen(msg);
    for (size_t i = 0; i < n;) {
        int l = utf8_seq_len((const unsigned char *)msg + i, n - i);
        if (l == 1 && (unsigned char)msg[i] < 0x20) msg[i] = ' ';
        if (!l) msg[i] = '?', l = 1;
        i += (size_t)l;
    }
    return status;
}

/* A JSON value's type, in the words a client reads (a list, not an array). */
static const char *const type_names[] = {
    [JSON_OBJECT] = "an object", [JSON_ARRAY] = "a list", [JSON_STRING] = "a string", [JSON_INTEGER] = "an integer",
    [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean", [JSON_FALSE] = "a boolean", [JSON_NULL] = "null"};
static const char *kind(const json_t *v) { return type_names[json_typeof(v)]; }

/* The item at index k (where names it in messages) into r's slot k. */
static int get_item(const json_t *it, const char *where, int k, const serve_limits *lim, serve_req *r, char *msg,
                    size_t msgsz)
{
    if (!json_is_object(it)) return fail(msg, msgsz, 400, "%s: expected an object, got %s", where, kind(it));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)it, key, v) {
        if (strcmp(key, "context") && strcmp(key, "question") && (strcmp(key, "nbest") || r->is_list))
            return fail(msg, msgsz, 400, "%s: unknown key \"%.40s\" (expected \"context\" and \"question\")", where, key);
    }
    json_t *c = json_object_get(it, "context"), *q = json_object_get(it, "question");
    if (!c) return fail(msg, msgsz, 400, "%s: missing \"context\"", where);
    if (!q) return fail(msg, msgsz, 400, "%s: missing \"question\"", where);
    if (!json_is_string(c)) return fail(msg, msgsz, 400, "%s: \"context\" must be a string, got %s", where, kind(c));
    if (!json_is_string(q)) return fail(msg, msgsz, 400, "%s: \"question\" must be a string, got %s", where, kind(q));
    size_t cl = json_string_length(c), ql = json_string_length(q);
    if (cl > lim->max_context)
        return fail(msg, msgsz, 413, "%s: context of %zu bytes is over the limit of %zu (--max-context-bytes)", where, cl,
                    lim->max_context);
    if (ql == 0) return fail(msg, msgsz, 400, "%s: empty \"question\"", where);
    /* Jansson refuses \u0000 unless asked, so these hold no NUL. */
    r->context[k] = xmalloc(cl + 1);
    memcpy(r->context[k], json_string_value(c), cl + 1);
    r->context_len[k] = cl;
    r->question[k] = xstrdup(json_string_value(q));
    return 0;
}

static int get_nbest(const json_t *o, const serve_limits *lim, serve_req *r, char *msg, size_t msgsz)
{
    json_t *v = json_object_get(o, "nbest");
    r->nbest = lim->def_nbest;
    if (!v) return 0;
    if (!json_is_integer(v)) return fail(msg, msgsz, 400, "\"nbest\" must be an integer, got %s", kind(v));
    json_int_t k = json_integer_value(v);
    if (k < 1 || k > lim->max_nbest)
        return fail(msg, msgsz, 400, "\"nbest\" %lld is out of range 1..%d", (long long)k, lim->max_nbest);
    r->nbest = (int)k;
    return 0;
}

int serve_req_parse(const char *body, size_t n, const serve_limits *lim, serve_req *out, char *msg, size_t msgsz)
{
    memset(out, 0, sizeof *out);
    if (msgsz) msg[0] = 0;
    if (n > lim->max_body)
        return fail(msg, msgsz, 413, "body of %zu bytes is over the limit of %zu (--max-body-bytes)", n, lim->max_body);
    size_t bad;
    if (utf8_find_invalid(body, n, &bad))
        return fail(msg, msgsz, 400, "body: invalid UTF-8 (or a NUL byte) at byte %zu", bad);
    json_error_t e;
    json_t *root = json_loadb(body, n, JSON_REJECT_DUPLICATES, &e);
    if (!root) return fail(msg, msgsz, 400, "body: not JSON: %s at line %d column %d", e.text, e.line, e.column);
    const json_t *items = NULL;
    int rc = 0;
    if (json_is_array(root)) {
        items = root;
        out->is_list = 1;
        out->nbest = lim->def_nbest;
    } else if (json_is_object(root) && json_object_get(root, "items")) {
        items = json_object_get(root, "items");
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (strcmp(key, "items") && strcmp(key, "nbest")) {
                rc = fail(msg, msgsz, 400, "body: unknown key \"%.40s\" beside \"items\"", key);
                goto done;
            }
        }
        if (!json_is_array(items)) {
            rc = fail(msg, msgsz, 400, "body: \"items\" must be a list, got %s", kind(items));
            goto done;
        }
        out->is_list = 1;
        if ((rc = get_nbest(root, lim, out, msg, msgsz))) goto done;
    } else if (json_is_object(root)) {
        if ((rc = get_nbest(root, lim, out, msg, msgsz))) goto done;
    } else {
        rc = fail(msg, msgsz, 400, "body: expected an object {\"context\", \"question\"} or a list of them, got %s",
                  kind(root));
        goto done;
    }
    size_t cnt = items ? json_array_size(items) : 1;
    if (cnt == 0) {
        rc = fail(msg, msgsz, 400, "body: empty list of questions");
        goto done;
    }
    if (cnt > (size_t)lim->max_items) {
        rc = fail(msg, msgsz, 413, "body: %zu questions, over the limit of %d (--max-items)", cnt, lim->max_items);
        goto done;
    }
    out->context = xcalloc(cnt, sizeof *out->context);
    out->context_len = xcalloc(cnt, sizeof *out->context_len);
    out->question = xcalloc(cnt, sizeof *out->question);
    for (size_t k = 0; k < cnt; k++) {
        char where[48];
        if (items) snprintf(where, sizeof where, "item %zu", k);
        else snprintf(where, sizeof where, "body");
        rc = get_item(items ? json_array_get(items, k) : root, where, (int)k, lim, out, msg, msgsz);
        out->n = (int)k + (rc ? 0 : 1);
        if (rc) {
            /* slot k may be half filled */
            free(out->context[k]);
            free(out->question[k]);
            out->context[k] = out->question[k] = NULL;
            goto done;
        }
    }
done:
    json_decref(root);
    if (rc) serve_req_free(out);
    return rc;
}

void serve_req_free(serve_req *r)
{
    for (int k = 0; k < r->n; k++) {
        free(r->context[k]);
        free(r->question[k]);
    }
    free(r->context);
    free(r->context_len);
    free(r->question);
    memset(r, 0, sizeof *r);
}
