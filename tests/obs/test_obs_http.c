/* The live page's server (obs_http.h) on loopback: the endpoints and their
 * contents, bad requests (unknown paths, other methods, a huge header, a
 * request that never ends), 1,000 parallel connections (bounded: the test
 * stops by itself after at most 30 s), a port that is taken, and that
 * publishing (what the trainer does) never waits on any of it. With an API
 * key: every endpoint without a key, with a wrong one (same length, a
 * prefix, one byte more, a Basic header) gets 401 with WWW-Authenticate and
 * a JSON error, with the key (header or ?key=) the same answers as without;
 * a bad key is refused at start. */
#define _GNU_SOURCE
#include "testutil.h"
#include "loopback.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "obs/live.h"
#include "obs/obs_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_to(int port, int nonblock) { return loopback_dial(port, nonblock ? SOCK_NONBLOCK : 0, 0); }

/* Sends req, reads the whole answer (until the server closes, 10 s at most)
 * into a malloc'ed string; returns the status code (0: none). */
static int http(int port, const char *req, size_t reqlen, char **body)
{
    *body = NULL;
    int fd = connect_to(port, 0);
    if (fd < 0) return 0;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t off = 0;
    while (off < reqlen) {
        ssize_t w = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    size_t n = 0, cap = 65536;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = 0;
    close(fd);
    int code = 0;
    sscanf(buf, "HTTP/1.%*d %d", &code);
    *body = buf;
    return code;
}

static int get(int port, const char *path, char **body)
{
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    return http(port, req, (size_t)n, body);
}

static void write_run(const char *dir)
{
    char path[1024];
    const char *m = "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s\n"
                    "1,0.1,5.9,1e-05,3.1,1,10.5,1\n2,0.2,5.1,2e-05,2.9,1,10.7,2\n3,0.3,4.4,3e-05,2.4,1,10.6,3\n";
    CHECK(file_write_atomic(path_join(path, sizeof path, dir, "metrics.csv"), m, strlen(m)) == 0, "metrics.csv");
}

/* 1,000 connections at once, each sending a request; counts the answers
 * and the connections the server closed without one. */
static void flood(int port, obs_http *h)
{
    enum { N = 1000 };
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < N + 64) {
        rl.rlim_cur = rl.rlim_max < N + 64 ? rl.rlim_max : N + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    static struct pollfd p[N];
    static int state[N]; /* 0 connecting, 1 sent, 2 answered 200, 3 closed/failed */
    int open_n = 0;
    for (int i = 0; i < N; i++) {
        p[i].fd = connect_to(port, 1);
        state[i] = p[i].fd < 0 ? 3 : 0;
        open_n += p[i].fd >= 0;
    }
    const char req[] = "GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    double t0 = clock_now_s(), worst_publish = 0;
    live_status s;
    live_init(&s);
    int left = open_n;
    char buf[4096];
    while (left > 0 && clock_now_s() - t0 < 30) {
        for (int i = 0; i < N; i++) {
            p[i].events = state[i] == 0 ? POLLOUT : state[i] == 1 ? POLLIN : 0;
            if (state[i] >= 2) p[i].fd = -p[i].fd - 1; /* ignored by poll */
        }
        poll(p, N, 100);
        for (int i = 0; i < N; i++) {
            if (state[i] >= 2) {
                p[i].fd = -p[i].fd - 1;
                continue;
            }
            if (state[i] == 0 && (p[i].revents & (POLLOUT | POLLERR | POLLHUP))) {
                if (send(p[i].fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) state[i] = 1;
                else state[i] = 3, left--;
            } else if (state[i] == 1 && (p[i].revents & (POLLIN | POLLERR | POLLHUP))) {
                ssize_t r = recv(p[i].fd, buf, sizeof buf - 1, 0);
                if (r > 0) {
                    buf[r] = 0;
                    state[i] = strstr(buf, " 200 ") ? 2 : 3;
                } else {
                    state[i] = 3;
                }
                left--;
            }
        }
        /* the trainer's side meanwhile: publishing must not wait */
        double a = clock_now_s();
        s.step = a - t0;
        obs_http_publish(h, &s);
        double d = clock_now_s() - a;
        if (d > worst_publish) worst_publish = d;
    }
    int ok = 0, closed = 0, pending = 0;
    for (int i = 0; i < N; i++) {
        int fd = p[i].fd < -1 ? -p[i].fd - 1 : p[i].fd;
        if (fd >= 0) close(fd);
        ok += state[i] == 2;
        closed += state[i] == 3;
        pending += state[i] < 2;
    }
    printf("flood: %d connections opened, %d answered 200, %d closed without an answer, %d pending after %.1f s; "
           "slowest publish %.3f ms\n", open_n, ok, closed, pending, clock_now_s() - t0, worst_publish * 1e3);
    CHECK(open_n >= 900, "only %d connections opened", open_n);
    CHECK(ok >= 64, "only %d answers", ok);
    CHECK(pending == 0, "%d connections still pending after 30 s", pending);
    CHECK(worst_publish < 0.05, "publish took %.3f s during the flood", worst_publish);
}

/* GET path with an extra header line (NULL: none); the answer's head and body in *body. */
static int get_with(int port, const char *path, const char *header, char **body)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s%sConnection: close\r\n\r\n", path,
                     header ? header : "", header ? "\r\n" : "");
    return http(port, req, (size_t)n, body);
}

static void keyed(const char *dir)
{
    const char *key = "s3cret-Key_1";
    obs_http *h = NULL;
    int rc = obs_http_start(&h, "127.0.0.1", 0, dir, NULL, "bad key");
    printf("a key with a space -> %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && !h && strstr(err_msg(), "byte 3 is a space"), "bad key refused");
    err_clear();
    CHECK(obs_http_start(&h, "127.0.0.1", 0, dir, NULL, key) == 0, "keyed start: %s", err_msg());
    if (!h) return;
    int port = obs_http_port(h);
    live_status s;
    live_init(&s);
    snprintf(s.state, sizeof s.state, "training");
    s.step = 3, s.total = 10, s.loss = 4.4;
    obs_http_publish(h, &s);
    static const struct {
        const char *path, *header;
        int want;
        const char *has;
    } cases[] = {
        {"/api/status", NULL, 401, "WWW-Authenticate: Bearer realm=\"bertc\""},
        {"/api/status", "Authorization: Bearer s3cret-Key_1", 200, "\"state\":"},
        {"/api/status", "Authorization: bearer s3cret-Key_1", 200, "\"state\":"},
        {"/api/status", "Authorization: Bearer s3cret-Key_2", 401, "error=\"invalid_token\""},
        {"/api/status", "Authorization: Bearer s3cret-Key_", 401, "\"error\": \"wrong API key\", \"status\": 401}"},
        {"/api/status", "Authorization: Bearer s3cret-Key_1x", 401, "wrong API key"},
        {"/api/status", "Authorization: Basic czNjcmV0LUtleV8x", 401, "is not 'Bearer KEY'"},
        {"/api/status?key=s3cret-Key_1", NULL, 200, "\"state\":"},
        {"/api/status?key=s3cret-Key_2", NULL, 401, "wrong API key"},
        {"/", NULL, 401, "\"status\": 401}"},
        {"/?key=s3cret-Key_1", NULL, 200, "'Bearer '+key"},
        {"/", "Authorization: Bearer s3cret-Key_1", 200, "<svg id=\"chart-loss\""},
        {"/metrics", NULL, 401, "Content-Type: application/json"},
        {"/metrics", "Authorization: Bearer s3cret-Key_1", 200, "# TYPE bertc_loss gauge"},
        {"/charts", NULL, 401, "needs an API key"},
        {"/charts?key=s3cret-Key_1", NULL, 200, "chart-throughput"},
        {"/no/such/path", NULL, 401, "needs an API key"},
        {"/no/such/path", "Authorization: Bearer s3cret-Key_1", 404, "not found"},
        {"/favicon.ico", NULL, 204, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *b;
        int code = get_with(port, cases[i].path, cases[i].header, &b);
        const char *body = b && strstr(b, "\r\n\r\n") ? strstr(b, "\r\n\r\n") + 4 : "";
        printf("keyed GET %s [%s] -> %d: %.100s\n", cases[i].path, cases[i].header ? cases[i].header : "no key", code,
               cases[i].want == 401 ? body : "");
        CHECK(code == cases[i].want, "%s [%s] -> %d, want %d", cases[i].path, cases[i].header ? cases[i].header : "",
              code, cases[i].want);
        CHECK(b && strstr(b, cases[i].has), "%s [%s] lacks %s", cases[i].path, cases[i].header ? cases[i].header : "",
              cases[i].has);
        free(b);
    }
    /* a POST: 401 without the key (nothing is learnt), 405 with it; ?key= counts for GET alone */
    char *b;
    const char post[] = "POST /api/status?key=s3cret-Key_1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                        "Connection: close\r\n\r\n";
    int code = http(port, post, sizeof post - 1, &b);
    CHECK(code == 401, "POST with ?key= -> %d", code);
    free(b);
    const char post2[] = "POST /api/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-Key_1\r\n"
                         "Content-Length: 0\r\nConnection: close\r\n\r\n";
    code = http(port, post2, sizeof post2 - 1, &b);
    CHECK(code == 405, "POST with the key -> %d", code);
    free(b);
    obs_http_stop(h);
}

int main(void)
{
    log_quiet(1);
    const char *dir = tu_tmpdir();
    write_run(dir);
    obs_http *h = NULL;
    CHECK(obs_http_start(&h, "127.0.0.1", 0, dir, NULL, NULL) == 0, "start: %s", err_msg());
    if (!h) return tu_done();
    int port = obs_http_port(h);
    printf("listening on 127.0.0.1:%d\n", port);
    CHECK(port > 0, "port %d", port);

    live_status s;
    live_init(&s);
    snprintf(s.state, sizeof s.state, "training");
    s.step = 3, s.total = 10, s.loss = 4.4, s.lr = 3e-5, s.examples_per_s = 10.6, s.eta_s = 7;
    s.ckpt_step = 2;
    snprintf(s.ckpt, sizeof s.ckpt, "%s/checkpoints/step-00000002", dir);
    obs_http_publish(h, &s);

    char *b;
    int code = get(port, "/api/status", &b);
    printf("/api/status -> %d: %.300s\n", code, b && strstr(b, "\r\n\r\n") ? strstr(b, "\r\n\r\n") + 4 : "");
    CHECK(code == 200, "status %d", code);
    CHECK(b && strstr(b, "\"step\":3,\"total_steps\":10"), "step/total in the JSON");
    CHECK(b && strstr(b, "\"state\":\"training\""), "state in the JSON");
    CHECK(b && strstr(b, "step-00000002"), "checkpoint in the JSON");
    CHECK(b && strstr(b, "application/json"), "content type");
    free(b);
    code = get(port, "/metrics", &b);
    CHECK(code == 200 && strstr(b, "\nbertc_step 3\n") && strstr(b, "# TYPE bertc_loss gauge"), "/metrics -> %d", code);
    free(b);
    code = get(port, "/", &b);
    CHECK(code == 200, "/ -> %d", code);
    CHECK(b && strstr(b, "<svg id=\"chart-loss\""), "the page has the loss chart");
    CHECK(b && strstr(b, "step 3/10 (30.0%)"), "the page has the progress line");
    CHECK(b && !strstr(b, "https://") && !strstr(b, "src=") && !strstr(b, "<link") && !strstr(b, "@import"),
          "the page is self-contained");
    printf("/ -> %d, %zu bytes\n", code, b ? strlen(b) : 0);
    free(b);
    code = get(port, "/charts", &b);
    CHECK(code == 200 && strstr(b, "chart-throughput"), "/charts -> %d", code);
    free(b);

    /* bad requests */
    code = get(port, "/nope/../../etc/passwd", &b);
    CHECK(code == 404, "unknown path -> %d", code);
    free(b);
    const char post[] = "POST /api/status HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    code = http(port, post, sizeof post - 1, &b);
    CHECK(code == 405, "POST -> %d", code);
    free(b);
    size_t big = 1 << 20;
    char *huge = malloc(big + 128);
    int n0 = snprintf(huge, 128, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(huge + n0, 'a', big);
    memcpy(huge + n0 + big, "\r\n\r\n", 4);
    code = http(port, huge, (size_t)n0 + big + 4, &b);
    printf("1 MiB header -> %d\n", code);
    CHECK(code == 0 || code == 431 || code == 413 || code == 400, "huge header -> %d", code);
    free(b);
    free(huge);
    const char garbage[] = "\x01\x02 nonsense\r\n\r\n";
    code = http(port, garbage, sizeof garbage - 1, &b);
    CHECK(code == 0 || code == 400, "garbage -> %d", code);
    free(b);
    /* a client that never finishes its request: others are still served, publishing does not wait */
    int slow = connect_to(port, 0);
    send(slow, "GET / HT", 8, MSG_NOSIGNAL);
    double a = clock_now_s();
    obs_http_publish(h, &s);
    double d = clock_now_s() - a;
    code = get(port, "/api/status", &b);
    CHECK(code == 200, "with a slow client -> %d", code);
    CHECK(d < 0.05, "publish took %.3f s", d);
    free(b);

    flood(port, h);
    code = get(port, "/api/status", &b);
    CHECK(code == 200, "after the flood -> %d", code);
    free(b);
    close(slow);

    /* the port is taken */
    obs_http *h2 = NULL;
    int rc = obs_http_start(&h2, "127.0.0.1", port, dir, NULL, NULL);
    printf("second server on %d -> %d: %s\n", port, rc, err_msg());
    CHECK(rc != 0 && h2 == NULL && strstr(err_msg(), "cannot serve the live page"), "port taken");
    err_clear();
    CHECK(obs_http_start(&h2, "not-an-address", 0, dir, NULL, NULL) == ERR_INPUT, "bad bind address");
    err_clear();
    printf("requests served: %ld\n", obs_http_served(h));
    obs_http_stop(h);
    keyed(dir);
    return tu_done();
}
