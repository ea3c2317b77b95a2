/* The body of POST /v1/answer, parsed and checked: a pure function of the
 * bytes (no model, no I/O), so that libFuzzer can drive it
 * (tests/fuzz/fuzz_serve_req.c).
 *
 *   {"context": "...", "question": "..."[, "nbest": K]}
 *   [{"context": ..., "question": ...}, ...]          (a list: one result each)
 *   {"items": [{...}, ...][, "nbest": K]}             (the same, with options)
 *
 * Rejected, with one line that says where: a body over max_body bytes
 * (413), a body that is not valid UTF-8 (with the byte offset), not JSON
 * (line:column), not an object or a list, an empty list or more than
 * max_items, an item that is not an object, a missing or non-string
 * "context"/"question", an empty question, a context over max_context
 * bytes (413), "nbest" not an integer in 1..max_nbest, unknown keys
 * (400). */
#ifndef BERTC_SERVE_REQ_H
#define BERTC_SERVE_REQ_H

#include <stddef.h>

typedef struct {
    size_t max_body;    /* bytes */
    size_t max_context; /* bytes of one context */
    int max_items;      /* questions in one request */
    int max_nbest;      /* largest "nbest" */
    int def_nbest;      /* "nbest" when not given */
} serve_limits;

typedef struct {
    int n;               /* items */
    char **context;      /* [n] NUL-terminated UTF-8 (no NUL inside) */
    size_t *context_len; /* [n] bytes */
    char **question;     /* [n] */
    int is_list;         /* the answer is {"results": [...]} rather than one {"answers": [...]} */
    int nbest;
} serve_req;

/* 0 and *out filled, or an HTTP status (400 or 413) with the reason in
 * msg (always NUL-terminated); *out is then empty. Never allocates more
 * than a small multiple of n. */
int serve_req_parse(const char *body, size_t n, const serve_limits *lim, serve_req *out, char *msg, size_t msgsz);
void serve_req_free(serve_req *r);

#endif
