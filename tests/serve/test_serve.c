/* bertc serve in-process (src/serve/): answers through HTTP equal the
 * library's answers for the same question run alone (one window per
 * forward, as `bertc predict --batch 1`), whatever a request was batched
 * with; a bounded load of concurrent clients with 10 % malformed requests
 * (every valid one 200 with its own answer, every malformed one its 4xx);
 * a full queue gives 503 with Retry-After; a request that waits past
 * --timeout-ms gives 504; metrics count what happened. */
#include "core/alloc.h"
#include "core/err.h"
#include "infer/adhoc.h"
#include "serve/serve_batch.h"
#include "serve/serve_http.h"
#include "testutil.h"
#include "loopback.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MODEL "tests/ref/train3/init"
#define NPAIRS 12

static char *g_ctx[NPAIRS], *g_q[NPAIRS];
static char *g_want[NPAIRS]; /* the answers alone, as JSON text of the "answers" list */

/* ---- a small HTTP/1.1 client (one request per connection) ---- */

typedef struct {
    int status, retry_after;
    char *body;
} http_resp;

static int http_do(int port, const char *method, const char *path, const char *body, size_t n, http_resp *r)
{
    memset(r, 0, sizeof *r);
    int fd = loopback_dial(port, 0, 0);
    if (fd < 0) return -1;
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, n);
    if (write(fd, head, (size_t)hn) != hn || (n && write(fd, body, n) != (ssize_t)n)) {
        close(fd);
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1024 > cap) buf = xrealloc(buf, cap *= 2);
        ssize_t k = read(fd, buf + len, cap - len - 1);
        if (k <= 0) break;
        len += (size_t)k;
    }
    close(fd);
    buf[len] = 0;
    if (sscanf(buf, "HTTP/1.1 %d", &r->status) != 1) {
        free(buf);
        return -1;
    }
    const char *ra = strstr(buf, "Retry-After: ");
    if (ra) r->retry_after = atoi(ra + 13);
    char *sep = strstr(buf, "\r\n\r\n");
    r->body = xstrdup(sep ? sep + 4 : "");
    free(buf);
    return 0;
}

/* "answers" of a response body, as compact JSON text (NULL if absent). */
static char *answers_of(const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    if (!j) return NULL;
    char *s = json_dumps(json_object_get(j, "answers"), JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(j);
    return s;
}

/* Largest |difference| between the logits of two answer lists with the same texts; -1 when texts or offsets differ. */
static double answers_diff(const char *a, const char *b)
{
    json_t *x = json_loads(a, JSON_DECODE_ANY, NULL), *y = json_loads(b, JSON_DECODE_ANY, NULL);
    double d = -1;
    if (x && y && json_array_size(x) == json_array_size(y) && json_array_size(x) > 0) {
        d = 0;
        for (size_t i = 0; i < json_array_size(x); i++) {
            json_t *p = json_array_get(x, i), *q = json_array_get(y, i);
            if (strcmp(json_string_value(json_object_get(p, "text")), json_string_value(json_object_get(q, "text"))) ||
                json_integer_value(json_object_get(p, "start")) != json_integer_value(json_object_get(q, "start"))) {
                d = -1;
                break;
            }
            static const char *k[] = {"start_logit", "end_logit", "score"};
            for (int t = 0; t < 3; t++) {
                double e = fabs(json_real_value(json_object_get(p, k[t])) - json_real_value(json_object_get(q, k[t])));
                if (e > d) d = e;
            }
        }
    }
    json_decref(x);
    json_decref(y);
    return d;
}

static char *item_json(int i)
{
    json_t *o = json_pack("{s:s, s:s, s:i}", "context", g_ctx[i], "question", g_q[i], "nbest", 5);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* Reference: each pair alone, through the library (qa_model_predict, one window per forward). */
static void make_reference(void)
{
    qa_model m;
    int rc = qa_model_load(&m, MODEL, 42);
    backend_opts bo = backend_opts_default();
    bo.threads = 1;
    bo.quiet = 1;
    if (!rc) rc = qa_model_start(&m, &bo, 1, 64);
    CHECK(rc == 0, "reference model: %s", err_msg());
    for (int i = 0; i < NPAIRS && !rc; i++) {
        squad_data d;
        size_t n = strlen(g_ctx[i]);
        const char *c = g_ctx[i], *q = g_q[i];
        rc = adhoc_data(&d, 1, &c, &n, &q, NULL, "ctx");
        features f;
        feature_opts fo = {64, 16, 0, 0};
        if (!rc) rc = features_build(&d, m.tok, &fo, 1, &f);
        qa_predictions p;
        postprocess_opts po = {.n_best = PREDICT_N_BEST, .max_answer_length = PREDICT_MAX_ANSWER_LENGTH};
        if (!rc) rc = qa_model_predict(&m, &d, &f, &po, &p, NULL);
        CHECK(rc == 0, "reference %d: %s", i, err_msg());
        if (rc) break;
        json_t *arr = json_array();
        for (int k = 0; k < p.n_nbest[0] && k < 5; k++) {
            const qa_answer *x = &p.nbest[0][k];
            json_array_append_new(arr, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f}", "text", x->text, "start", x->begin_cp,
                                                 "end", x->end_cp, "score", (double)x->score, "start_logit",
                                                 (double)x->start_logit, "end_logit", (double)x->end_logit));
        }
        g_want[i] = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
        if (i < 3 || f.n > 1) printf("reference %d: %d windows, top answer \"%s\"\n", i, f.n, p.nbest[0][0].text);
        qa_predictions_free(&p);
        features_free(&f);
        squad_free(&d);
    }
    qa_model_free(&m);
}

/* ---- load ---- */

typedef struct {
    int port, id, count;
    int ok, bad_expected, wrong;
    double max_diff;
} client;

static const char *k_bad[] = {
    "{\"context\": \"abc\"",                       /* not JSON */
    "{\"context\": \"abc\"}",                      /* no question */
    "{\"context\": 5, \"question\": \"q\"}",       /* not a string */
    "{\"context\": \"a\xff\", \"question\": \"q\"}", /* invalid UTF-8 */
    "[]",                                          /* empty list */
    "{\"context\": \"abc\", \"question\": \"\"}",  /* empty question */
    "\"just a string\"",
    "{\"context\": \"abc\", \"question\": \"q\", \"nbest\": 99}",
};
#define N_BAD (int)(sizeof k_bad / sizeof k_bad[0])

static void *client_main(void *arg)
{
    client *c = arg;
    unsigned seed = 17u + (unsigned)c->id;
    for (int r = 0; r < c->count; r++) {
        seed = seed * 1103515245u + 12345u;
        int pick = (int)((seed >> 8) % 100);
        http_resp h;
        if (pick < 10) {
            const char *b = k_bad[(seed >> 16) % N_BAD];
            if (http_do(c->port, "POST", "/v1/answer", b, strlen(b), &h) == 0 && h.status == 400 && strstr(h.body, "\"error\""))
                c->bad_expected++;
            else {
                c->wrong++;
                fprintf(stderr, "client %d: malformed %s -> %d %s\n", c->id, b, h.status, h.body ? h.body : "");
            }
        } else {
            int i = (int)((seed >> 12) % NPAIRS);
            char *b = item_json(i);
            int rc = http_do(c->port, "POST", "/v1/answer", b, strlen(b), &h);
            free(b);
            char *got = rc == 0 && h.status == 200 ? answers_of(h.body) : NULL;
            double d = got && g_want[i] ? answers_diff(got, g_want[i]) : -1;
            if (d >= 0 && d <= 1e-4) {
                c->ok++;
                if (d > c->max_diff) c->max_diff = d;
            } else {
                c->wrong++;
                fprintf(stderr, "client %d: pair %d -> %d (diff %g)\n  got  %s\n  want %s\n", c->id, i, h.status, d,
                        got ? got : (h.body ? h.body : ""), g_want[i]);
            }
            free(got);
        }
        free(h.body);
    }
    return NULL;
}

static serve_server *start(qa_model *m, int wait_ms, int queue_limit, int timeout_ms, int rows)
{
    serve_opts o = {.bind = "127.0.0.1", .port = 0, .http_threads = 4, .max_connections = 128, .idle_timeout_s = 10,
                    .timeout_ms = timeout_ms, .max_answer_length = PREDICT_MAX_ANSWER_LENGTH, .fo = {64, 16, 0},
                    .lim = {1 << 16, 20000, 16, 20, 5}, .batch = {wait_ms * 1000, rows * 64, queue_limit}};
    serve_server *s = NULL;
    int rc = serve_start(&s, m, &o);
    CHECK(rc == 0, "serve_start: %s", err_msg());
    return s;
}

typedef struct {
    int port;
    http_resp r;
    char *body;
} bg_req;

static void *bg_main(void *arg)
{
    bg_req *q = arg;
    if (http_do(q->port, "POST", "/v1/answer", q->body, strlen(q->body), &q->r)) q->r.status = -1;
    return NULL;
}

static uint64_t metric(int port, const char *name)
{
    http_resp h;
    if (http_do(port, "GET", "/metrics", "", 0, &h)) return (uint64_t)-1;
    char *p = strstr(h.body, name);
    uint64_t v = p ? strtoull(p + strlen(name), NULL, 10) : (uint64_t)-1;
    free(h.body);
    return v;
}

/* Contexts (every third long enough for several 64-token windows) and
 * questions into g_ctx, g_q. */
static void make_pairs(void)
{
    static const char *names[] = {"Kopa Labs", "Vima Tesa", "the Orun river", "Dire Pogu", "Lake Semba", "Tarn Hall"};
    for (int i = 0; i < NPAIRS; i++) {
        char buf[4096];
        int n = snprintf(buf, sizeof buf, "%s was founded by %s in %d. ", names[i % 6], names[(i + 1) % 6], 1900 + 7 * i);
        /* every third context is long enough for several 64-token windows */
        for (int k = 0; k < (i % 3 == 2 ? 8 : 1); k++)
            n += snprintf(buf + n, sizeof buf - (size_t)n, "The museum near %s holds %d paintings and a café. ",
                          names[(i + k) % 6], 10 * k + i);
        g_ctx[i] = xstrdup(buf);
        snprintf(buf, sizeof buf, "Who founded %s?", names[i % 6]);
        g_q[i] = xstrdup(buf);
    }
}

/* A list request: each item's answers equal its own alone. */
static void check_list(int port)
{
    json_t *arr = json_array();
    for (int i = 0; i < 4; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s}", "context", g_ctx[i], "question", g_q[i]));
    char *b = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    http_resp h;
    int r2 = http_do(port, "POST", "/v1/answer", b, strlen(b), &h);
    free(b);
    json_t *j = r2 == 0 ? json_loads(h.body, 0, NULL) : NULL;
    json_t *res = json_object_get(j, "results");
    int same = json_array_size(res) == 4;
    for (int i = 0; i < 4 && same; i++) {
        char *a = json_dumps(json_object_get(json_array_get(res, (size_t)i), "answers"), JSON_COMPACT);
        same = a && answers_diff(a, g_want[i]) >= 0 && answers_diff(a, g_want[i]) <= 1e-4;
        free(a);
    }
    printf("list of 4 items -> %d, each item's answers as alone: %s\n", h.status, same ? "yes" : "no");
    CHECK(h.status == 200 && same, "list request: %s", h.body);
    json_decref(j);
    free(h.body);
}

/* 1. Concurrent load: requests batched with each other; answers equal the
 * ones alone; the metrics count them; a list request. 0, or -1 when the
 * server does not start. */
static int check_load(qa_model *m)
{
    serve_server *s = start(m, 10, 4096, 0, 8);
    if (!s) return -1;
    int port = serve_port(s);
    int nclients = 6, per = tu_sanitized() ? 25 : 100;
    client cl[8] = {{0}};
    pthread_t th[8];
    for (int i = 0; i < nclients; i++) {
        cl[i] = (client){.port = port, .id = i, .count = per};
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    int ok = 0, bad = 0, wrong = 0;
    double maxd = 0;
    for (int i = 0; i < nclients; i++) {
        pthread_join(th[i], NULL);
        ok += cl[i].ok, bad += cl[i].bad_expected, wrong += cl[i].wrong;
        if (cl[i].max_diff > maxd) maxd = cl[i].max_diff;
    }
    uint64_t forwards = metric(port, "bertc_serve_batch_windows_count "), windows = metric(port, "bertc_serve_batch_windows_sum ");
    printf("load: %d clients x %d requests: %d valid answered as alone, %d malformed got 400, %d wrong; "
           "%llu windows in %llu forwards (%.2f per forward); largest logit difference batched vs alone %.3g "
           "(answers identical)\n",
           nclients, per, ok, bad, wrong, (unsigned long long)windows, (unsigned long long)forwards,
           forwards ? (double)windows / (double)forwards : 0.0, maxd);
    CHECK(wrong == 0 && ok + bad == nclients * per, "%d wrong", wrong);
    CHECK(forwards != (uint64_t)-1 && forwards < windows, "no batching happened: %llu windows in %llu forwards",
          (unsigned long long)windows, (unsigned long long)forwards);
    uint64_t n200 = metric(port, "bertc_serve_requests_total{code=\"200\"} "),
             n400 = metric(port, "bertc_serve_requests_total{code=\"400\"} ");
    printf("metrics: %llu answered 200 (plus the /metrics calls), %llu answered 400\n", (unsigned long long)n200,
           (unsigned long long)n400);
    CHECK(n400 == (uint64_t)bad && n200 >= (uint64_t)ok, "metrics disagree");
    check_list(port);
    serve_stop(s, 10);
    return 0;
}

/* 2. A full queue: 503 with Retry-After; the queued request still answered
 * (b0: a request's body). */
static void check_queue_full(qa_model *m, char *b0)
{
    serve_server *s = start(m, 1500, 1, 0, 8);
    int port = serve_port(s);
    bg_req a = {port, {0}, b0};
    pthread_t t;
    pthread_create(&t, NULL, bg_main, &a);
    usleep(300 * 1000);
    http_resp h;
    int rc = http_do(port, "POST", "/v1/answer", b0, strlen(b0), &h);
    printf("queue full (--queue-limit 1, one request waiting) -> %d, Retry-After %d: %s", h.status, h.retry_after,
           h.body ? h.body : "\n");
    CHECK(rc == 0 && h.status == 503 && h.retry_after >= 1, "want 503 with Retry-After");
    free(h.body);
    pthread_join(t, NULL);
    char *got = answers_of(a.r.body ? a.r.body : "");
    printf("the waiting request -> %d\n", a.r.status);
    CHECK(a.r.status == 200 && got && answers_diff(got, g_want[0]) >= 0, "queued request: %s", a.r.body);
    free(got);
    free(a.r.body);
    serve_stop(s, 10);
}

/* 3. Timeout: 504. 4. Graceful stop: a request in flight when serve_stop
 * starts is answered. */
static void check_timeout_stop(qa_model *m, char *b0)
{
    serve_server *s = start(m, 1500, 64, 200, 8);
    int port = serve_port(s);
    http_resp h;
    int rc = http_do(port, "POST", "/v1/answer", b0, strlen(b0), &h);
    printf("waited 1.5 s with --timeout-ms 200 -> %d: %s", h.status, h.body ? h.body : "\n");
    CHECK(rc == 0 && h.status == 504, "want 504");
    free(h.body);
    bg_req a = {port, {0}, b0};
    serve_server *s2 = start(m, 800, 64, 0, 8);
    a.port = serve_port(s2);
    pthread_t t;
    pthread_create(&t, NULL, bg_main, &a);
    usleep(200 * 1000);
    serve_stop(s2, 10);
    pthread_join(t, NULL);
    printf("request in flight during serve_stop -> %d\n", a.r.status);
    CHECK(a.r.status == 200, "in-flight request lost at stop: %d", a.r.status);
    free(a.r.body);
    serve_stop(s, 10);
}

/* The token budget of a packed model: serve's (max_tokens 0) holds max_B
 * whole windows, which its batcher fills (a budget below that failed its
 * forwards); QA_MAX_TOKENS_AUTO (predict) takes the CPU's budget. */
static void check_token_budget(void)
{
    bert_config cfg = {0};
    cfg.intermediate_size = 1536;
    int64_t t1 = qa_model_cpu_tokens(&cfg, 32, 384);
    cfg.intermediate_size = 3072;
    int64_t t2 = qa_model_cpu_tokens(&cfg, 32, 384), t3 = qa_model_cpu_tokens(&cfg, 2, 384);
    cfg.intermediate_size = 1 << 20;
    int64_t t4 = qa_model_cpu_tokens(&cfg, 32, 384);
    CHECK(t1 == 2048 && t2 == 1024 && t3 == 768 && t4 == 384, "cpu tokens %lld %lld %lld %lld", (long long)t1,
          (long long)t2, (long long)t3, (long long)t4);
    backend_opts bo = backend_opts_default();
    bo.threads = 1;
    bo.quiet = 1;
    int64_t got[2] = {-2, -2}, want[2], kept = -2;
    for (int i = 0; i < 2; i++) {
        qa_model m;
        int rc = qa_model_load(&m, MODEL, 42);
        m.packing = PACKING_VARLEN;
        m.max_tokens = i ? QA_MAX_TOKENS_AUTO : 0;
        if (!rc) rc = qa_model_start(&m, &bo, 16, 64);
        CHECK(rc == 0, "model: %s", err_msg());
        if (!rc) got[i] = bert_model_max_tokens(m.model);
        if (!i) kept = m.max_tokens;
        want[i] = i ? qa_model_cpu_tokens(&m.cfg, 16, 64) : 16 * 64;
        qa_model_free(&m);
    }
    CHECK(kept == 0, "max_tokens 0 became %lld: serve's model would not hold its batcher's windows", (long long)kept);
    CHECK(got[0] == want[0] && got[1] == want[1], "packed capacity %lld (serve) and %lld (auto), want %lld and %lld",
          (long long)got[0], (long long)got[1], (long long)want[0], (long long)want[1]);
    printf("token budget: minilm-like 2048, base-like 1024 (768 at 2 windows), huge FFN one window; a packed model "
           "with max_tokens 0 holds max_B x T = %lld, auto %lld\n",
           (long long)got[0], (long long)got[1]);
}

static void job_done(serve_job *j, void *arg)
{
    (void)j;
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

/* The batcher's cut is pack_cut's: 8 windows of 16 real tokens of 64 under
 * a budget of 2 x 64 tokens are one packed forward (their real tokens fit),
 * and four padded ones (a padded window counts 64). */
static void check_batch_cut(void)
{
    enum { W = 8, T = 64, LEN = 16 };
    int32_t ids[W * T] = {0}, types[W * T] = {0}, mask[W * T] = {0};
    for (int w = 0; w < W; w++)
        for (int t = 0; t < LEN; t++) {
            ids[w * T + t] = 5 + w + t; /* within any vocabulary of the tests */
            mask[w * T + t] = 1;
        }
    features f = {.n = W, .T = T, .input_ids = ids, .token_type_ids = types, .attention_mask = mask};
    backend_opts bo = backend_opts_default();
    bo.threads = 1;
    bo.quiet = 1;
    for (int packed = 0; packed < 2; packed++) {
        qa_model m;
        int rc = qa_model_load(&m, MODEL, 42);
        m.packing = packed ? PACKING_VARLEN : PACKING_NONE;
        m.max_tokens = 0;
        if (!rc) rc = qa_model_start(&m, &bo, W, T);
        serve_batcher *b = NULL;
        serve_batch_opts o = {0, 2 * T, 64};
        if (!rc) rc = serve_batcher_create(&b, &m, &o);
        CHECK(rc == 0, "batcher: %s", err_msg());
        if (rc) return;
        float *st = xcalloc(W * T, sizeof *st), *en = xcalloc(W * T, sizeof *en);
        int done = 0;
        serve_job j = {.f = &f, .start = st, .end = en, .done = job_done, .arg = &done};
        CHECK(serve_batcher_submit(b, &j) == 0, "submit");
        while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) usleep(1000);
        serve_batch_stats bs;
        serve_batcher_stats(b, &bs);
        uint64_t want = packed ? 1 : 4;
        printf("batch cut, %s: %llu windows in %llu forwards (want %llu)\n", packed ? "packed" : "padded",
               (unsigned long long)bs.windows, (unsigned long long)bs.forwards, (unsigned long long)want);
        CHECK(j.status == 200 && bs.windows == W && bs.forwards == want, "%s: status %d (%s), %llu windows in %llu forwards",
              packed ? "packed" : "padded", j.status, j.msg, (unsigned long long)bs.windows, (unsigned long long)bs.forwards);
        serve_batcher_free(b);
        free(st);
        free(en);
        qa_model_free(&m);
    }
}

int main(void)
{
    log_quiet(1);
    check_token_budget();
    check_batch_cut();
    make_pairs();
    make_reference();

    qa_model m;
    backend_opts bo = backend_opts_default();
    bo.threads = 1;
    bo.quiet = 1;
    int rc = qa_model_load(&m, MODEL, 42);
    if (!rc) rc = qa_model_start(&m, &bo, 8, 64);
    CHECK(rc == 0, "model: %s", err_msg());
    if (rc) return tu_done();
    if (check_load(&m)) return tu_done();
    char *b0 = item_json(0);
    check_queue_full(&m, b0);
    check_timeout_stop(&m, b0);
    free(b0);
    qa_model_free(&m);
    for (int i = 0; i < NPAIRS; i++) free(g_ctx[i]), free(g_q[i]), free(g_want[i]);
    return tu_done();
}
