/* libmicrohttpd glue of `bertc serve` (see serve_http.h). */
#include "serve/serve_http.h"

#include "core/alloc.h"
#include "core/apikey.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/sbuf.h"
#include "infer/adhoc.h"
#include "infer/infer.h"
#include "infer/predict.h"
#include "infer/pyjson.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Status codes counted in /metrics (the last slot: any other). */
static const int k_codes[] = {200, 400, 401, 404, 405, 413, 500, 503, 504, 0};
#define N_CODES (sizeof k_codes / sizeof k_codes[0])
static const double k_lat_le[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define N_LAT (sizeof k_lat_le / sizeof k_lat_le[0])

struct serve_server {
    struct MHD_Daemon *d;
    qa_model *m;
    serve_batcher *b;
    serve_opts o;
    apikey key; /* n = 0: none */
    int port;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when inflight drops to 0 */
    int inflight, draining;
    uint64_t code_count[N_CODES];
    uint64_t lat_bucket[N_LAT + 1], lat_count, items;
    double lat_sum;
    sbuf health; /* the body of GET /health: what answers (device, precision, backend) */
};

enum { R_ANSWER, R_PAGE, R_HEALTH, R_METRICS, R_UNKNOWN, R_DONE };
enum { S_RECV, S_QUEUED, S_REJECTED };

typedef struct {
    serve_server *s;
    struct MHD_Connection *conn;
    int route, state, too_big, counted;
    const char *www_auth; /* the WWW-Authenticate header of a 401 */
    double t0;
    char *body;
    size_t len, cap;
    serve_req req;
    squad_data d;
    features f;
    int have_d, have_f;
    serve_job job;
} req_ctx;

/* ---- responses ---- */

static enum MHD_Result reply(req_ctx *c, int status, const char *type, const char *body, size_t n, const char *allow,
                            int retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (c->www_auth) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, c->www_auth);
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer"); /* a /?key= URL goes nowhere else */
    if (retry_after) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    serve_server *s = c->s;
    pthread_mutex_lock(&s->mu);
    if (s->draining) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    size_t k = 0;
    while (k_codes[k] && k_codes[k] != status) k++;
    s->code_count[k]++;
    if (c->route == R_ANSWER) {
        double dt = clock_now_s() - c->t0;
        size_t b = 0;
        while (b < N_LAT && dt > k_lat_le[b]) b++;
        s->lat_bucket[b]++;
        s->lat_count++;
        s->lat_sum += dt;
        if (status == 200) s->items += (uint64_t)c->req.n;
    }
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    c->route = R_DONE;
    return ret;
}

static enum MHD_Result send_error(req_ctx *c, int status, const char *msg, const char *allow, int retry_after)
{
    sbuf b = {0};
    sb_puts(&b, "{\"error\": ");
    sb_json_string(&b, msg, SB_JSON_PYTHON);
    sb_printf(&b, ", \"status\": %d}\n", status);
    enum MHD_Result r = reply(c, status, "application/json", b.p, b.n, allow, retry_after);
    sb_free(&b);
    return r;
}

/* One item's answers: {"answers": [...], "windows": W}. */
static void put_answers(sbuf *b, const qa_predictions *p, const features *f, int i, int nbest)
{
    int windows = 0;
    for (int w = 0; w < f->n; w++) windows += f->example[w] == i;
    sb_puts(b, "{\"answers\": [");
    int k = p->n_nbest[i] < nbest ? p->n_nbest[i] : nbest;
    for (int a = 0; a < k; a++) {
        const qa_answer *x = &p->nbest[i][a];
        sb_puts(b, a ? ", {\"text\": " : "{\"text\": ");
        sb_json_string(b, x->text, SB_JSON_PYTHON);
        sb_printf(b, ", \"start\": %d, \"end\": %d, \"score\": ", x->begin_cp, x->end_cp);
        pyjson_float(b, (double)x->score);
        sb_puts(b, ", \"start_logit\": ");
        pyjson_float(b, (double)x->start_logit);
        sb_puts(b, ", \"end_logit\": ");
        pyjson_float(b, (double)x->end_logit);
        sb_puts(b, ", \"probability\": ");
        pyjson_float(b, x->probability);
        sb_puts(b, "}");
    }
    sb_printf(b, "], \"windows\": %d}", windows);
}

static enum MHD_Result send_answers(req_ctx *c)
{
    infer_params ip = {.data = &c->d, .f = &c->f, .start_logits = c->job.start, .end_logits = c->job.end,
                       .post = {.n_best = PREDICT_N_BEST, .max_answer_length = c->s->o.max_answer_length}};
    infer_result r;
    int rc = infer_run(&ip, &r);
    const qa_predictions *p = &r.pred;
    if (rc) {
        infer_result_free(&r);
        return send_error(c, 500, err_msg(), NULL, 0);
    }
    sbuf b = {0};
    if (c->req.is_list) {
        sb_puts(&b, "{\"results\": [");
        for (int i = 0; i < c->req.n; i++) {
            if (i) sb_puts(&b, ", ");
            put_answers(&b, p, &c->f, i, c->req.nbest);
        }
        sb_puts(&b, "]}\n");
    } else {
        put_answers(&b, p, &c->f, 0, c->req.nbest);
        sb_puts(&b, "\n");
    }
    infer_result_free(&r);
    enum MHD_Result res = reply(c, 200, "application/json", b.p, b.n, NULL, 0);
    sb_free(&b);
    return res;
}

static enum MHD_Result send_metrics(req_ctx *c)
{
    serve_server *s = c->s;
    serve_batch_stats bs;
    serve_batcher_stats(s->b, &bs);
    sbuf b = {0};
    pthread_mutex_lock(&s->mu);
    sb_puts(&b, "# HELP bertc_serve_requests_total HTTP requests answered, by status code.\n"
                "# TYPE bertc_serve_requests_total counter\n");
    for (size_t k = 0; k < N_CODES; k++) {
        if (k_codes[k]) sb_printf(&b, "bertc_serve_requests_total{code=\"%d\"} %llu\n", k_codes[k],
                                  (unsigned long long)s->code_count[k]);
        else sb_printf(&b, "bertc_serve_requests_total{code=\"other\"} %llu\n",
                       (unsigned long long)s->code_count[k]);
    }
    sb_puts(&b, "# HELP bertc_serve_questions_total Questions answered (a request may hold several).\n"
                "# TYPE bertc_serve_questions_total counter\n");
    sb_printf(&b, "bertc_serve_questions_total %llu\n", (unsigned long long)s->items);
    sb_puts(&b, "# HELP bertc_serve_request_seconds Latency of POST /v1/answer, arrival to response.\n"
                "# TYPE bertc_serve_request_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t k = 0; k <= N_LAT; k++) {
        cum += s->lat_bucket[k];
        if (k < N_LAT) sb_printf(&b, "bertc_serve_request_seconds_bucket{le=\"%g\"} %llu\n", k_lat_le[k],
                                 (unsigned long long)cum);
        else sb_printf(&b, "bertc_serve_request_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    sb_printf(&b, "bertc_serve_request_seconds_sum %.6f\nbertc_serve_request_seconds_count %llu\n",
              s->lat_sum, (unsigned long long)s->lat_count);
    sb_printf(&b, "# HELP bertc_serve_inflight Requests being handled now.\n# TYPE bertc_serve_inflight gauge\n"
              "bertc_serve_inflight %d\n", s->inflight);
    pthread_mutex_unlock(&s->mu);
    sb_puts(&b, "# HELP bertc_serve_batch_windows Windows per forward pass.\n"
                "# TYPE bertc_serve_batch_windows histogram\n");
    cum = 0;
    for (int k = 0; k < 8; k++) {
        cum += bs.batch_hist[k];
        if (k < 7) sb_printf(&b, "bertc_serve_batch_windows_bucket{le=\"%d\"} %llu\n", 1 << k,
                             (unsigned long long)cum);
        else sb_printf(&b, "bertc_serve_batch_windows_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    sb_printf(&b, "bertc_serve_batch_windows_sum %llu\nbertc_serve_batch_windows_count %llu\n",
              (unsigned long long)bs.windows, (unsigned long long)bs.forwards);
    sb_printf(&b, "# HELP bertc_serve_forward_seconds_total Time in forward passes.\n"
              "# TYPE bertc_serve_forward_seconds_total counter\nbertc_serve_forward_seconds_total %.6f\n", bs.forward_seconds);
    sb_printf(&b, "# HELP bertc_serve_queue_requests Requests waiting for a forward pass.\n"
              "# TYPE bertc_serve_queue_requests gauge\nbertc_serve_queue_requests %d\n", bs.queued_jobs);
    sb_printf(&b, "# HELP bertc_serve_queue_windows Windows waiting for a forward pass.\n"
              "# TYPE bertc_serve_queue_windows gauge\nbertc_serve_queue_windows %d\n", bs.queued_windows);
    sb_printf(&b, "# HELP bertc_serve_queue_timeouts_total Requests dropped after waiting past --timeout-ms.\n"
              "# TYPE bertc_serve_queue_timeouts_total counter\nbertc_serve_queue_timeouts_total %llu\n",
              (unsigned long long)bs.timeouts);
    enum MHD_Result r = reply(c, 200, "text/plain; version=0.0.4", b.p, b.n, NULL, 0);
    sb_free(&b);
    return r;
}

/* ---- the request ---- */

static void job_done(serve_job *job, void *arg)
{
    (void)job;
    req_ctx *c = arg;
    MHD_resume_connection(c->conn); /* the last touch: c may be freed as soon as this returns */
}

/* The body is in: parse, tokenise, enqueue (suspending the connection). */
static enum MHD_Result start_answer(req_ctx *c)
{
    serve_server *s = c->s;
    char msg[300];
    if (c->too_big) {
        snprintf(msg, sizeof msg, "body over the limit of %zu bytes (--max-body-bytes)", s->o.lim.max_body);
        return send_error(c, 413, msg, NULL, 0);
    }
    int st = serve_req_parse(c->body ? c->body : "", c->len, &s->o.lim, &c->req, msg, sizeof msg);
    if (st) return send_error(c, st, msg, NULL, 0);
    int rc = adhoc_data(&c->d, c->req.n, (const char *const *)c->req.context, c->req.context_len,
                        (const char *const *)c->req.question, NULL, "context");
    if (rc) return send_error(c, 400, err_msg(), NULL, 0);
    c->have_d = 1;
    rc = features_build(&c->d, s->m->tok, &s->o.fo, 1, &c->f);
    if (rc) return send_error(c, rc == ERR_INPUT ? 400 : 500, err_msg(), NULL, 0);
    c->have_f = 1;
    for (int i = 0; i < c->req.n; i++) {
        int any = 0;
        for (int w = 0; w < c->f.n && !any; w++) any = c->f.example[w] == i;
        if (!any) {
            snprintf(msg, sizeof msg, "item %d: the question leaves no room for the context in %d tokens", i,
                     s->o.fo.max_seq_length);
            return send_error(c, 400, msg, NULL, 0);
        }
    }
    size_t n = (size_t)c->f.n * (size_t)c->f.T;
    c->job.f = &c->f;
    c->job.start = xmalloc(n * sizeof *c->job.start);
    c->job.end = xmalloc(n * sizeof *c->job.end);
    c->job.deadline = s->o.timeout_ms > 0 ? clock_now_s() + 1e-3 * s->o.timeout_ms : 0;
    c->job.done = job_done;
    c->job.arg = c;
    c->state = S_QUEUED;
    MHD_suspend_connection(c->conn);
    if (serve_batcher_submit(s->b, &c->job)) {
        c->state = S_REJECTED;
        MHD_resume_connection(c->conn);
    }
    return MHD_YES;
}

static int is_get(const char *method) { return !strcmp(method, "GET") || !strcmp(method, "HEAD"); }

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    serve_server *s = cls;
    req_ctx *c = *con_cls;
    if (!c) {
        c = xcalloc(1, sizeof *c);
        c->s = s;
        c->conn = conn;
        c->t0 = clock_now_s();
        *con_cls = c;
        pthread_mutex_lock(&s->mu);
        s->inflight++;
        c->counted = 1;
        int draining = s->draining;
        pthread_mutex_unlock(&s->mu);
        if (!strcmp(url, "/v1/answer")) c->route = R_ANSWER;
        else if (!strcmp(url, "/")) c->route = R_PAGE;
        else if (!strcmp(url, "/health")) c->route = R_HEALTH;
        else if (!strcmp(url, "/metrics")) c->route = R_METRICS;
        else c->route = R_UNKNOWN;
        /* The key before anything else, so that without it nothing is learnt (not even which paths exist). */
        if (c->route != R_HEALTH) {
            const char *q = is_get(method) ? MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "key") : NULL;
            apikey_verdict v = apikey_check(&s->key, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                                  MHD_HTTP_HEADER_AUTHORIZATION), q);
            if (v != APIKEY_OK) {
                c->www_auth = apikey_challenge(v);
                return send_error(c, 401, apikey_verdict_msg(v), NULL, 0);
            }
        }
        if (c->route == R_UNKNOWN) {
            char msg[200];
            snprintf(msg, sizeof msg, "no such path: %.100s (POST /v1/answer, GET /, /health, /metrics)", url);
            return send_error(c, 404, msg, NULL, 0);
        }
        if (c->route == R_ANSWER && strcmp(method, "POST"))
            return send_error(c, 405, "use POST for /v1/answer", "POST", 0);
        if (c->route != R_ANSWER && !is_get(method)) return send_error(c, 405, "use GET here", "GET, HEAD", 0);
        if (draining && c->route == R_ANSWER) return send_error(c, 503, "the server is shutting down", NULL, 1);
        if (c->route == R_ANSWER) {
            const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl && strtoull(cl, NULL, 10) > s->o.lim.max_body) {
                char msg[160];
                snprintf(msg, sizeof msg, "body of %.30s bytes is over the limit of %zu (--max-body-bytes)", cl,
                         s->o.lim.max_body);
                return send_error(c, 413, msg, NULL, 0);
            }
        }
        return MHD_YES;
    }
    switch (c->route) {
    case R_PAGE: return reply(c, 200, "text/html; charset=utf-8", serve_page_html, strlen(serve_page_html), NULL, 0);
    case R_HEALTH: return reply(c, 200, "application/json", c->s->health.p, c->s->health.n, NULL, 0);
    case R_METRICS: return send_metrics(c);
    case R_DONE:
        *upload_size = 0; /* a response is queued already; the rest of the body is dropped */
        return MHD_YES;
    default: break;
    }
    if (c->state == S_RECV) {
        if (*upload_size) {
            size_t n = *upload_size;
            if (!c->too_big && c->len + n <= s->o.lim.max_body) {
                if (c->len + n + 1 > c->cap) {
                    c->cap = (c->len + n + 1) * 2;
                    if (c->cap > s->o.lim.max_body + 1) c->cap = s->o.lim.max_body + 1;
                    c->body = xrealloc(c->body, c->cap);
                }
                memcpy(c->body + c->len, upload, n);
                c->len += n;
            } else {
                c->too_big = 1;
            }
            *upload_size = 0;
            return MHD_YES;
        }
        return start_answer(c);
    }
    if (c->state == S_REJECTED)
        return send_error(c, 503, "the queue is full (--queue-limit); retry later", NULL, 1);
    if (c->job.status == 200) return send_answers(c);
    return send_error(c, c->job.status ? c->job.status : 500, c->job.msg[0] ? c->job.msg : "inference failed", NULL, 0);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)conn, (void)toe;
    serve_server *s = cls;
    req_ctx *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    free(c->body);
    serve_req_free(&c->req);
    if (c->have_f) features_free(&c->f);
    if (c->have_d) squad_free(&c->d);
    free(c->job.start);
    free(c->job.end);
    if (c->counted) {
        pthread_mutex_lock(&s->mu);
        if (--s->inflight == 0) pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->mu);
    }
    free(c);
}

int serve_check_bind(const char *bind)
{
    unsigned char a[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, bind, a) == 1 || inet_pton(AF_INET6, bind, a) == 1) return 0;
    return err_set(ERR_INPUT, "serve --bind %s: not an IPv4 or IPv6 address", bind);
}

/* What serve_start made besides the batcher and the daemon (the key wiped). */
static void server_free(serve_server *s)
{
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    sb_free(&s->health);
    apikey_wipe(&s->key);
    free(s);
}

int serve_start(serve_server **out, qa_model *m, const serve_opts *o)
{
    if (m->T != o->fo.max_seq_length)
        return err_set(ERR_RUNTIME, "serve: the model is set up for %d tokens, the options say %d", m->T,
                       o->fo.max_seq_length);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, o->bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
    } else if (inet_pton(AF_INET6, o->bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        flags |= MHD_USE_IPv6;
    } else {
        return err_set(ERR_INPUT, "serve --bind %s: not an IPv4 or IPv6 address", o->bind);
    }
    serve_server *s = xcalloc(1, sizeof *s);
    int rc = apikey_set(&s->key, o->api_key, "serve --api-key");
    if (rc) {
        free(s);
        return rc;
    }
    s->m = m;
    s->o = *o;
    s->o.api_key = NULL; /* kept in s->key alone */
    sb_printf(&s->health, "{\"status\": \"ok\", \"device\": \"%s\", \"precision\": \"%s\", \"backend\": ",
              m->info.is_cuda ? "cuda" : "cpu", select_precision_name(m->info.precision));
    sb_json_string(&s->health, m->info.desc, SB_JSON_PYTHON);
    sb_puts(&s->health, "}\n");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    rc = serve_batcher_create(&s->b, m, &o->batch);
    if (rc) goto fail;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(o->http_threads > 1 ? o->http_threads : 0),
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)o->idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
    if (!s->d) {
        rc = err_set(ERR_RUNTIME, "serve: cannot listen on %s port %d (in use, or not an address of this machine?)",
                     o->bind, o->port);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    *out = s;
    return 0;
fail:
    serve_batcher_free(s->b);
    server_free(s);
    return rc;
}

int serve_port(const serve_server *s) { return s->port; }

void serve_stop(serve_server *s, double grace_s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    pthread_mutex_unlock(&s->mu);
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    double until = clock_now_s() + grace_s;
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0 && clock_now_s() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->idle, &s->mu, &ts);
    }
    int left = s->inflight;
    pthread_mutex_unlock(&s->mu);
    if (left) log_warn("serve: %d requests still in flight after %.0f s; stopping anyway", left, grace_s);
    /* The batcher runs what is queued (resuming those connections) before it stops. */
    serve_batcher_free(s->b);
    MHD_stop_daemon(s->d);
    server_free(s);
}
