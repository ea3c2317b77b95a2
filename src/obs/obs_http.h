/* The live page of a training run (`bertc train --http PORT`), served by
 * libmicrohttpd in its own threads:
 *
 *   /             the page: status box (progress line with ETA, latest
 *                 evaluation and checkpoint, GPU/CPU), and the report's
 *                 charts (report.h), refreshed every 3 s by a small inline
 *                 script (relative URLs, so it works behind a proxy such as
 *                 Colab's); self-contained, nothing from the network
 *   /charts       the chart cards alone (HTML)
 *   /api/status   live_json (live.h)
 *   /metrics      live_prometheus
 *
 * The trainer never waits on the network: it publishes a live_status with
 * obs_http_publish, which copies it under a mutex that request handlers
 * hold only to copy it out. The charts are drawn from the run dir's files
 * by the server's threads, at most once every 2 s (a cache). Bounds: 2
 * worker threads, 64 connections (more are accepted and closed), 32 KiB of
 * memory per connection (a bigger request head is answered 431 or closed),
 * a connection idle for 10 s is closed. Only GET and HEAD are answered.
 *
 * With an API key every request (but /favicon.ico, an empty 204) needs
 * "Authorization: Bearer KEY" or ?key=KEY in its URL: a browser opens the
 * page as /?key=KEY, and the page's script sends the header on its own
 * requests (and puts ?key= on its links). A missing or wrong key gets 401
 * with WWW-Authenticate: Bearer and {"error": "...", "status": 401}, as
 * `bertc serve` does; the key is compared in constant time (core/apikey.h). */
#ifndef BERTC_OBS_HTTP_H
#define BERTC_OBS_HTTP_H

#include "obs/live.h"
#include "obs/monitor.h"

typedef struct obs_http obs_http;

/* Listens on bind_addr (IPv4 or IPv6 literal; NULL = 127.0.0.1) port
 * (0 = any free port). mon (may be NULL) gives the latest resource sample
 * at each request. api_key NULL or "": no key. ERR_RUNTIME naming the
 * address when it cannot listen (the port is taken); ERR_INPUT for a key
 * that apikey_set refuses. */
int obs_http_start(obs_http **out, const char *bind_addr, int port, const char *run_dir, monitor *mon,
                   const char *api_key);
/* The port it listens on. */
int obs_http_port(const obs_http *h);
void obs_http_publish(obs_http *h, const live_status *s);
/* Stops the threads and closes every connection. NULL is fine. */
void obs_http_stop(obs_http *h);

/* Requests answered so far, by kind, for tests. */
long obs_http_served(obs_http *h);

#endif
