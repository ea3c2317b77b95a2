/* The live page's HTTP server on libmicrohttpd (see obs_http.h). */
#define _GNU_SOURCE
#include "obs/obs_http.h"
#include "core/clock.h"
#include "obs/report.h"
#include "obs/rundir.h"
#include "core/alloc.h"
#include "core/apikey.h"
#include "core/err.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum { HTTP_THREADS = 2, HTTP_CONNECTIONS = 64, HTTP_CONN_MEMORY = 32 * 1024, HTTP_TIMEOUT_S = 10 };
#define CHART_CACHE_S 2.0

struct obs_http {
    struct MHD_Daemon *d;
    int port;
    char run_dir[4096];
    monitor *mon;
    apikey key;                  /* n = 0: the page is open */
    pthread_mutex_t lock;        /* guards snap */
    live_status snap;
    pthread_mutex_t render_lock; /* guards the chart cache */
    char *charts;
    double charts_at;
    _Atomic long served;
    char start_err[256];
};

/* MHD's own messages: only the ones while starting are kept (they say why
 * it could not listen); later ones (a client that went away) are dropped. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    obs_http *h = cls;
    if (h->d || h->start_err[0]) return;
    vsnprintf(h->start_err, sizeof h->start_err, fmt, ap);
    h->start_err[strcspn(h->start_err, "\n")] = 0;
}

static void snapshot(obs_http *h, live_status *s)
{
    pthread_mutex_lock(&h->lock);
    *s = h->snap;
    pthread_mutex_unlock(&h->lock);
    if (h->mon && monitor_samples(h->mon) > 0) {
        nvml_sample g;
        proc_sample p;
        monitor_last_sample(h->mon, &g, &p);
        if (monitor_has_gpu(h->mon)) {
            s->gpu_util_pct = g.util_pct;
            s->gpu_mem_used_gib = g.mem_used / 1073741824.0;
            s->gpu_mem_total_gib = g.mem_total / 1073741824.0;
            s->gpu_temp_c = g.temp_c;
            s->gpu_power_w = g.power_w;
        }
        s->cpu_pct = p.cpu_pct;
        s->rss_gib = p.rss / 1073741824.0;
    }
}

/* The chart cards, drawn from the run dir at most every CHART_CACHE_S. */
static char *charts(obs_http *h)
{
    pthread_mutex_lock(&h->render_lock);
    double t = clock_now_s();
    if (!h->charts || t - h->charts_at >= CHART_CACHE_S) {
        rundir d;
        sbuf c = {0}, e = {0};
        if (rundir_load(&d, h->run_dir) == 0) {
            report_charts(&d, &c, &e);
            if (!c.n) sb_puts(&c, "<p class=\"sub\">no data yet</p>\n");
        } else {
            err_clear();
            sb_puts(&c, "<p class=\"sub\">the run dir cannot be read</p>\n");
        }
        rundir_free(&d);
        sb_free(&e);
        free(h->charts);
        h->charts = c.p;
        h->charts_at = t;
    }
    char *out = xstrdup(h->charts);
    pthread_mutex_unlock(&h->render_lock);
    return out;
}

static const char page_script[] =
    "<script>\n"
    "(function(){\n"
    "  function $(id){return document.getElementById(id);}\n"
    /* With an API key the page was opened as /?key=KEY: the key goes with its requests as a header, and on its links. */
    "  const key=new URLSearchParams(location.search).get('key'),opt={cache:'no-store',headers:{}};\n"
    "  if(key){opt.headers.Authorization='Bearer '+key;\n"
    "    document.querySelectorAll('a.keyed').forEach(function(a){a.href+='?key='+encodeURIComponent(key);});}\n"
    "  async function tick(){\n"
    "    try{\n"
    "      const r=await fetch('api/status',opt);\n"
    "      if(!r.ok){$('conn').textContent='error '+r.status+(r.status==401?': open this page as /?key=KEY':'');return;}\n"
    "      const s=await r.json();\n"
    "      $('status').textContent=s.text;\n"
    "      $('conn').textContent='updated '+new Date().toLocaleTimeString();\n"
    "      const c=await fetch('charts',opt);\n"
    "      $('charts').innerHTML=await c.text();\n"
    "    }catch(e){$('conn').textContent='no answer from the trainer (finished or stopped?)';}\n"
    "  }\n"
    "  setInterval(tick,3000);\n"
    "})();\n"
    "</script>\n";

static void page(obs_http *h, sbuf *o)
{
    live_status s;
    snapshot(h, &s);
    sbuf text = {0};
    live_text(&s, &text);
    char *c = charts(h);
    sb_puts(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>bertc live: ");
    sb_html(o, h->run_dir);
    sb_printf(o, "</title>\n<style>%spre.status{background:#fff;border:1px solid #ddd;padding:8px 12px;font-size:13px;"
                 "white-space:pre-wrap;max-width:1140px}</style>\n</head>\n<body>\n<h1>bertc live</h1>\n<div class=\"sub\">",
              report_css);
    sb_html(o, h->run_dir);
    sb_puts(o, " &middot; <span id=\"conn\">refreshes every 3 s</span> &middot; <a class=\"keyed\" href=\"api/status\">api/status</a>"
               " &middot; <a class=\"keyed\" href=\"metrics\">metrics</a></div>\n<h2>Status</h2>\n<pre class=\"status\" id=\"status\">");
    sb_html(o, text.p ? text.p : "");
    sb_printf(o, "</pre>\n<h2>Charts</h2>\n<div class=\"grid\" id=\"charts\">\n%s</div>\n%s</body>\n</html>\n", c,
              page_script);
    free(c);
    sb_free(&text);
}

static enum MHD_Result reply_with(struct MHD_Connection *con, unsigned code, sbuf *body, const char *type,
                                  const char *challenge)
{
    if (!body->p) sb_puts(body, "");
    struct MHD_Response *r = MHD_create_response_from_buffer(body->n, body->p, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        sb_free(body);
        return MHD_NO;
    }
    body->p = NULL; /* owned by the response now */
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer"); /* a /?key= URL goes nowhere else */
    if (challenge) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    enum MHD_Result ret = MHD_queue_response(con, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *con, unsigned code, sbuf *body, const char *type)
{
    return reply_with(con, code, body, type, NULL);
}

/* 0 when the request may go on; else 1, with the verdict's 401 queued (*ret). */
static int refused(obs_http *h, struct MHD_Connection *con, const char *method, enum MHD_Result *ret)
{
    int get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    const char *q = get ? MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "key") : NULL;
    apikey_verdict v = apikey_check(&h->key, MHD_lookup_connection_value(con, MHD_HEADER_KIND,
                                                                         MHD_HTTP_HEADER_AUTHORIZATION), q);
    if (v == APIKEY_OK) return 0;
    sbuf b = {0};
    sb_puts(&b, "{\"error\": ");
    sb_json_string(&b, apikey_verdict_msg(v), SB_JSON_PYTHON);
    sb_puts(&b, ", \"status\": 401}\n");
    *ret = reply_with(con, MHD_HTTP_UNAUTHORIZED, &b, "application/json", apikey_challenge(v));
    return 1;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    obs_http *h = cls;
    sbuf b = {0};
    enum MHD_Result ret;
    /* The key first (only the empty favicon is open), so that without it nothing is learnt. */
    if (h->key.n && strcmp(url, "/favicon.ico") && refused(h, con, method, &ret)) return ret;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        sb_puts(&b, "only GET and HEAD\n");
        return reply(con, MHD_HTTP_METHOD_NOT_ALLOWED, &b, "text/plain; charset=utf-8");
    }
    atomic_fetch_add(&h->served, 1);
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        page(h, &b);
        return reply(con, MHD_HTTP_OK, &b, "text/html; charset=utf-8");
    }
    if (!strcmp(url, "/api/status")) {
        live_status s;
        snapshot(h, &s);
        live_json(&s, &b);
        return reply(con, MHD_HTTP_OK, &b, "application/json");
    }
    if (!strcmp(url, "/metrics")) {
        live_status s;
        snapshot(h, &s);
        live_prometheus(&s, &b);
        return reply(con, MHD_HTTP_OK, &b, "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!strcmp(url, "/charts")) {
        char *c = charts(h);
        sb_puts(&b, c);
        free(c);
        return reply(con, MHD_HTTP_OK, &b, "text/html; charset=utf-8");
    }
    if (!strcmp(url, "/favicon.ico")) /* browsers ask; no icon, and no error in their console */
        return reply(con, MHD_HTTP_NO_CONTENT, &b, "image/x-icon");
    sb_puts(&b, "not found; try /, /api/status or /metrics\n");
    return reply(con, MHD_HTTP_NOT_FOUND, &b, "text/plain; charset=utf-8");
}

int obs_http_start(obs_http **out, const char *bind_addr, int port, const char *run_dir, monitor *mon,
                   const char *api_key)
{
    *out = NULL;
    if (!bind_addr || !*bind_addr) bind_addr = "127.0.0.1";
    if (port < 0 || port > 65535) return err_set(ERR_INPUT, "--http %d: not a port (0 to 65535)", port);
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, bind_addr, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, bind_addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return err_set(ERR_INPUT, "--http-bind %s: not an IPv4 or IPv6 address", bind_addr);
    }
    obs_http *h = xcalloc(1, sizeof *h);
    int rc = apikey_set(&h->key, api_key, "the live page's API key");
    if (rc) {
        free(h);
        return rc;
    }
    snprintf(h->run_dir, sizeof h->run_dir, "%s", run_dir);
    h->mon = mon;
    live_init(&h->snap);
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->render_lock, NULL);
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                            MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)HTTP_CONNECTIONS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_END);
    if (!h->d) {
        rc = err_set(ERR_RUNTIME, "cannot serve the live page on %s port %d: %s", bind_addr, port,
                     h->start_err[0] ? h->start_err : "libmicrohttpd could not start");
        apikey_wipe(&h->key);
        pthread_mutex_destroy(&h->lock);
        pthread_mutex_destroy(&h->render_lock);
        free(h);
        return rc;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info && info->port ? info->port : port;
    *out = h;
    return 0;
}

int obs_http_port(const obs_http *h) { return h ? h->port : 0; }

long obs_http_served(obs_http *h) { return h ? atomic_load(&h->served) : 0; }

void obs_http_publish(obs_http *h, const live_status *s)
{
    if (!h) return;
    pthread_mutex_lock(&h->lock);
    h->snap = *s;
    pthread_mutex_unlock(&h->lock);
}

void obs_http_stop(obs_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->lock);
    pthread_mutex_destroy(&h->render_lock);
    free(h->charts);
    apikey_wipe(&h->key);
    free(h);
}
