/* `bertc serve`: the HTTP server (libmicrohttpd) in front of the batcher.
 *
 *   POST /v1/answer   {"context", "question"} or a list -> n-best answers (serve_req.h)
 *   GET  /            a page to type a context and a question
 *   GET  /health      {"status": "ok"}
 *   GET  /metrics     Prometheus text: requests by status, latency histogram,
 *                     batch sizes, queue length
 *
 * With an API key (serve_opts.api_key), every request but /health needs
 * "Authorization: Bearer KEY", or for a GET (what a browser opens by
 * address) ?key=KEY in the URL; the page then sends the header itself. A
 * missing or wrong key gets 401 with WWW-Authenticate: Bearer and the JSON
 * error of every other refusal ({"error": "...", "status": 401}). The key
 * is compared in constant time (core/apikey.h).
 *
 * The HTTP threads parse, tokenise (features_build) and enqueue; the
 * connection is suspended while its windows wait for a forward, and
 * resumed by the worker; the answers are then post-processed
 * (postprocess_predictions, as `bertc predict` does) on the HTTP thread. */
#ifndef BERTC_SERVE_HTTP_H
#define BERTC_SERVE_HTTP_H

#include "data/features.h"
#include "infer/qa_model.h"
#include "serve/serve_batch.h"
#include "serve/serve_req.h"

typedef struct {
    const char *bind;      /* IPv4 or IPv6 address */
    const char *api_key;   /* NULL: no key, every request is let in */
    int port;              /* 0: any free port (serve_port says which) */
    int http_threads;
    int max_connections;
    int idle_timeout_s;    /* an idle connection is closed after this */
    int timeout_ms;        /* a request that waited this long in the queue gets 504 */
    int max_answer_length;
    feature_opts fo;
    serve_limits lim;
    serve_batch_opts batch;
} serve_opts;

typedef struct serve_server serve_server;

/* ERR_INPUT when bind is not an IPv4 or IPv6 address. */
int serve_check_bind(const char *bind);
/* m must be started (qa_model_start) for T = o->fo.max_seq_length. */
int serve_start(serve_server **out, qa_model *m, const serve_opts *o);
int serve_port(const serve_server *s);
/* Graceful stop: no new connections, new requests on open ones get 503,
 * the requests in flight finish (for at most grace_s seconds), then
 * everything is closed and freed. */
void serve_stop(serve_server *s, double grace_s);

/* The page of GET / (serve_page.c). */
extern const char serve_page_html[];

#endif
