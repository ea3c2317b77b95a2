/* serve_load: a bounded HTTP load generator for `bertc serve` (and for
 * bench/serve/serve_hf.py, which speaks the same API).
 *
 *   serve_load --port P --bodies FILE [--requests N] [--concurrency C] [--bad-percent B] [--dump FILE]
 *              [--api-key KEY]
 *
 * FILE holds one JSON request body per line. Each of C client threads keeps
 * one keep-alive connection (reconnecting after the server closes it) and
 * sends requests until N have been sent in all; a request is, with
 * probability B %, one of a fixed set of malformed bodies (which must get
 * 400), else a random line of FILE (which must get 200 and the same top
 * answer -- text and character offsets -- that the line got when sent alone
 * before the load started). Prints requests/s and the p50/p99 latency of the
 * valid requests; exits 1 on any wrong or failed response. --dump writes
 * each line's answer alone (text and offsets), one a line. --api-key sends
 * "Authorization: Bearer KEY" with every request (`bertc serve --api-key`). */
#define _GNU_SOURCE
#include "loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_port, g_total, g_bad_pct;
static const char *g_key; /* --api-key; NULL: no Authorization header */
static char **g_body;
static size_t *g_len;
static char **g_want;
static int g_n;
static int g_next; /* requests handed out */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *k_bad[] = {
    "{\"context\": \"abc\"",
    "{\"context\": \"abc\"}",
    "{\"question\": \"q\"}",
    "{\"context\": 5, \"question\": \"q\"}",
    "{\"context\": \"a\xff\", \"question\": \"q\"}",
    "[]",
    "{\"context\": \"abc\", \"question\": \"\"}",
    "\"just a string\"",
    "{\"context\": \"abc\", \"question\": \"q\", \"nbest\": 0}",
    "{\"context\": \"abc\", \"question\": \"q\", \"extra\": 1}",
};
#define N_BAD (int)(sizeof k_bad / sizeof k_bad[0])

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dial(void) { return loopback_dial(g_port, 0, 1); }

typedef struct {
    int fd;
    char *buf;
    size_t cap;
} conn;

/* One POST on c (dialling when needed); status, body (in c->buf) and whether the server closes. 0 or -1. */
static int post(conn *c, const char *body, size_t n, int *status, char **resp)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && (c->fd = dial()) < 0) return -1;
        char head[800];
        int hn = snprintf(head, sizeof head,
                          "POST /v1/answer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          "%s%.600s%sContent-Length: %zu\r\n\r\n", g_key ? "Authorization: Bearer " : "",
                          g_key ? g_key : "", g_key ? "\r\n" : "", n);
        if (send(c->fd, head, (size_t)hn, MSG_NOSIGNAL) != hn || send(c->fd, body, n, MSG_NOSIGNAL) != (ssize_t)n) {
            close(c->fd);
            c->fd = -1;
            continue;
        }
        size_t len = 0;
        ssize_t k;
        char *end = NULL;
        size_t clen = 0, total = 0;
        for (;;) {
            if (len + 4096 > c->cap) c->buf = realloc(c->buf, c->cap = 2 * c->cap + 8192);
            k = recv(c->fd, c->buf + len, c->cap - len - 1, 0);
            if (k <= 0) break;
            len += (size_t)k;
            c->buf[len] = 0;
            if (!end && (end = strstr(c->buf, "\r\n\r\n"))) {
                char *cl = strcasestr(c->buf, "Content-Length: ");
                clen = cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0;
                total = (size_t)(end - c->buf) + 4 + clen;
            }
            if (end && len >= total) break;
        }
        if (!end || len < total) {
            close(c->fd);
            c->fd = -1;
            if (len == 0 && attempt == 0) continue; /* the server closed an idle keep-alive connection */
            return -1;
        }
        c->buf[total] = 0;
        if (sscanf(c->buf, "HTTP/1.1 %d", status) != 1) return -1;
        *end = 0;
        int closing = strcasestr(c->buf, "Connection: close") != NULL;
        *resp = end + 4;
        if (closing) {
            close(c->fd);
            c->fd = -1;
        }
        return 0;
    }
    return -1;
}

/* The top answer's text and offsets: the bytes from "answers" to its "score". */
static char *top_answer(const char *resp)
{
    const char *a = strstr(resp, "{\"text\": ");
    const char *e = a ? strstr(a, ", \"score\"") : NULL;
    return a && e ? strndup(a, (size_t)(e - a)) : NULL;
}

typedef struct {
    int id, ok, bad_ok, wrong, failed;
    double *lat;
    int nlat;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    conn c = {-1, NULL, 0};
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
    for (;;) {
        pthread_mutex_lock(&g_mu);
        int mine = g_next < g_total ? g_next++ : -1;
        pthread_mutex_unlock(&g_mu);
        if (mine < 0) break;
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int bad = (int)(s % 100) < g_bad_pct;
        int i = (int)((s >> 20) % (uint64_t)(bad ? N_BAD : g_n));
        const char *b = bad ? k_bad[i] : g_body[i];
        size_t n = bad ? strlen(b) : g_len[i];
        int st = 0;
        char *resp = NULL;
        double t0 = now();
        int rc = post(&c, b, n, &st, &resp);
        double dt = now() - t0;
        if (rc) {
            w->failed++;
            fprintf(stderr, "serve_load: request %d: no response (%s)\n", mine, strerror(errno));
        } else if (bad) {
            if (st == 400 && strstr(resp, "\"error\"")) w->bad_ok++;
            else {
                w->wrong++;
                fprintf(stderr, "serve_load: malformed body %d -> %d %.200s\n", i, st, resp);
            }
        } else {
            char *top = st == 200 ? top_answer(resp) : NULL;
            if (top && !strcmp(top, g_want[i])) {
                w->ok++;
                w->lat[w->nlat++] = dt;
            } else {
                w->wrong++;
                fprintf(stderr, "serve_load: body %d -> %d %.300s\n  want %s\n", i, st, top ? top : resp, g_want[i]);
            }
            free(top);
        }
    }
    if (c.fd >= 0) close(c.fd);
    free(c.buf);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *bodies = NULL, *dump = NULL;
    int conc = 8;
    g_total = 1000;
    g_bad_pct = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) g_port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bodies")) bodies = argv[i + 1];
        else if (!strcmp(argv[i], "--requests")) g_total = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--concurrency")) conc = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bad-percent")) g_bad_pct = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
        else if (!strcmp(argv[i], "--api-key")) g_key = argv[i + 1];
        else {
            fprintf(stderr, "serve_load: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!g_port || !bodies || conc < 1 || conc > 1024 || g_total < 1 || g_bad_pct < 0 || g_bad_pct > 100) {
        fprintf(stderr, "usage: serve_load --port P --bodies FILE [--requests N] [--concurrency C] [--bad-percent B] "
                        "[--api-key KEY]\n");
        return 2;
    }
    FILE *f = fopen(bodies, "r");
    if (!f) {
        fprintf(stderr, "serve_load: %s: %s\n", bodies, strerror(errno));
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t k;
    while ((k = getline(&line, &cap, f)) > 0) {
        while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r')) line[--k] = 0;
        if (!k) continue;
        g_body = realloc(g_body, (size_t)(g_n + 1) * sizeof *g_body);
        g_len = realloc(g_len, (size_t)(g_n + 1) * sizeof *g_len);
        g_body[g_n] = strdup(line);
        g_len[g_n++] = (size_t)k;
    }
    free(line);
    fclose(f);
    if (!g_n) {
        fprintf(stderr, "serve_load: %s: no bodies\n", bodies);
        return 2;
    }
    /* Each body alone first: the answer the load must reproduce. */
    g_want = calloc((size_t)g_n, sizeof *g_want);
    conn c = {-1, NULL, 0};
    for (int i = 0; i < g_n; i++) {
        int st;
        char *resp;
        if (post(&c, g_body[i], g_len[i], &st, &resp) || st != 200 || !(g_want[i] = top_answer(resp))) {
            fprintf(stderr, "serve_load: body %d alone -> %d %.300s\n", i, st, resp ? resp : "(no response)");
            return 1;
        }
    }
    if (c.fd >= 0) close(c.fd);
    free(c.buf);
    if (dump) {
        FILE *d = fopen(dump, "w");
        for (int i = 0; d && i < g_n; i++) fprintf(d, "%s\n", g_want[i]);
        if (!d || fclose(d)) fprintf(stderr, "serve_load: cannot write %s\n", dump);
    }
    worker *w = calloc((size_t)conc, sizeof *w);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    double t0 = now();
    for (int i = 0; i < conc; i++) {
        w[i].id = i;
        w[i].lat = malloc((size_t)g_total * sizeof *w[i].lat);
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    int ok = 0, bad_ok = 0, wrong = 0, failed = 0, nlat = 0;
    double *lat = malloc((size_t)g_total * sizeof *lat);
    for (int i = 0; i < conc; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok, bad_ok += w[i].bad_ok, wrong += w[i].wrong, failed += w[i].failed;
        memcpy(lat + nlat, w[i].lat, (size_t)w[i].nlat * sizeof *lat);
        nlat += w[i].nlat;
        free(w[i].lat);
    }
    double wall = now() - t0;
    qsort(lat, (size_t)nlat, sizeof *lat, cmp_d);
    double p50 = nlat ? lat[(nlat - 1) / 2] : 0, p99 = nlat ? lat[(int)((nlat - 1) * 0.99)] : 0;
    printf("concurrency %d: %d requests in %.2f s = %.1f requests/s; valid %d (same answer as alone), malformed %d (400), "
           "wrong %d, failed %d; latency of valid requests p50 %.1f ms, p99 %.1f ms\n",
           conc, g_total, wall, g_total / wall, ok, bad_ok, wrong, failed, 1e3 * p50, 1e3 * p99);
    free(lat);
    free(w);
    free(th);
    return wrong || failed ? 1 : 0;
}
