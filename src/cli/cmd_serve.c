/* bertc serve: answers over HTTP, batched (src/serve/). */
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "infer/qa_model.h"
#include "serve/serve_http.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_serve_summary[] = "answer questions over HTTP (POST /v1/answer, a page at /, /metrics), batching requests";

int cmd_serve(int argc, char **argv)
{
    const char *model_dir = NULL, *bind = "127.0.0.1", *port_file = NULL;
    cli_window win = CLI_WINDOW_DEFAULT;
    cli_device dev = CLI_DEVICE_DEFAULT;
    int port = 8080, threads = 0, mql = 0;
    int max_ans = PREDICT_MAX_ANSWER_LENGTH, nbest = 5, wait_ms = 5, max_tokens = 0, queue_limit = 256, timeout_ms = 30000;
    int http_threads = 4, max_conn = 256, idle_s = 30, max_items = 64, grace_s = 30;
    int64_t max_body = 1 << 20, max_context = 100000;
    const char *packing = "varlen";
    cli_api_key_opts ak = {0};
    const arg_spec specs[] = {
        {"model", ARG_STR, &model_dir, "DIR", "model dir (e.g. RUN/final)", .required = 1},
        {"port", ARG_INT, &port, "N", "TCP port (default 8080; 0 = any free port, see --port-file)", .min = 0, .max = 65535},
        {"bind", ARG_STR, &bind, "ADDR", "address to listen on (default 127.0.0.1)", .min = 0},
        {"port-file", ARG_STR, &port_file, "FILE", "write the port listened on to FILE once ready", .min = 0},
        CLI_API_KEY_SPECS(&ak, "every request but GET /health"),
        CLI_DEVICE_SPECS(&dev),
        {"threads", ARG_INT, &threads, "N", "CPU threads of the forward pass (0 = all cores)", .min = 0, .max = 4096},
        CLI_WINDOW_SPECS(&win),
        {"max-query-length", ARG_INT, &mql, "N", "truncate questions to N tokens (0 = never)", .min = 0, .max = 8192},
        {"max-answer-length", ARG_INT, &max_ans, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"nbest", ARG_INT, &nbest, "K", "answers returned when a request does not say (\"nbest\"; at most 20)", .min = 1, .max = 20},
        {"batch-wait-ms", ARG_INT, &wait_ms, "MS", "how long a forward waits for more requests (default 5)", .min = 0, .max = 10000},
        {"max-batch-tokens", ARG_INT, &max_tokens, "N", "tokens per forward (windows x T; default 16 windows)", .min = 1,
         .max = 1 << 24},
        {"packing", ARG_STR, &packing, "P",
         "varlen|none (default varlen: only each window's real tokens are computed, answers as `bertc predict --packing varlen`; none: padded windows, answers as plain `bertc predict`)",
         .min = 0},
        {"queue-limit", ARG_INT, &queue_limit, "N", "windows waiting, at most; more gets 503 (default 256)", .min = 1,
         .max = 1 << 24},
        {"timeout-ms", ARG_INT, &timeout_ms, "MS", "a request that waited this long in the queue gets 504 (0 = never)",
         .min = 0, .max = 3600000},
        {"max-body-bytes", ARG_SIZE, &max_body, "N", "largest request body (default 1MiB)", .min = 2, .max = 1 << 30},
        {"max-context-bytes", ARG_SIZE, &max_context, "N", "largest context (default 100000 bytes)", .min = 1, .max = 1 << 30},
        {"max-items", ARG_INT, &max_items, "N", "questions in one request, at most (default 64)", .min = 1, .max = 100000},
        {"http-threads", ARG_INT, &http_threads, "N", "threads parsing and answering HTTP (default 4)", .min = 1, .max = 256},
        {"max-connections", ARG_INT, &max_conn, "N", "open connections, at most (default 256)", .min = 1, .max = 100000},
        {"idle-timeout", ARG_INT, &idle_s, "S", "close a connection idle this long (default 30 s)", .min = 1, .max = 86400},
        {"grace", ARG_INT, &grace_s, "S", "on SIGTERM, wait this long for requests in flight (default 30 s)", .min = 0,
         .max = 86400},
        {0},
    };
    int rc = args_parse("serve", "bertc serve --model DIR [--port 8080] [--bind 127.0.0.1] [--api-key-file PATH] [--device auto|cpu|cuda] [--threads N] [options]",
                        specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = cli_check_window("serve", &win))) return rc;
    int T = win.T, stride = win.stride;
    if ((rc = serve_check_bind(bind))) return rc;
    char *key = NULL;
    const char *key_from = NULL;
    if ((rc = cli_api_key("serve", &ak, &key, &key_from))) return rc;
    packing_kind pack;
    backend_opts bo;
    if ((rc = cli_parse_packing("serve", packing, &pack)) ||
        (rc = cli_answer_backend_opts("serve", &dev, threads, &bo))) {
        free(key);
        return rc;
    }
    /* Every thread started from here on (libmicrohttpd's, the worker, OpenMP's) leaves these to sigwait below. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    qa_model m;
    rc = qa_model_load(&m, model_dir, 42);
    if (rc) {
        free(key);
        return rc;
    }
    serve_server *s = NULL;
    rc = qa_model_select(&m, &bo);
    if (rc) goto done;
    if (m.qa_initialised) log_warn("%s has no qa_outputs: answers come from a random QA head", model_dir);
    qa_model_fit_window(&m, &T, win.T_given, &stride, win.stride_given);
    feature_opts fo = {T, stride, mql, 0}; /* serve answers as v1.1 predict does */
    if ((rc = features_check_opts(&fo))) goto done;
    if (!max_tokens) max_tokens = 16 * T;
    int rows = max_tokens / T < 1 ? 1 : max_tokens / T;
    m.packing = pack; /* a forward takes up to rows windows, only their real tokens computed */
    rc = qa_model_start(&m, &bo, rows, T);
    if (rc) goto done;
    serve_opts so = {
        .bind = bind, .api_key = key, .port = port, .http_threads = http_threads, .max_connections = max_conn,
        .idle_timeout_s = idle_s, .timeout_ms = timeout_ms, .max_answer_length = max_ans, .fo = fo,
        .lim = {(size_t)max_body, (size_t)max_context, max_items, 20, nbest},
        .batch = {wait_ms * 1000, max_tokens, queue_limit},
    };
    rc = serve_start(&s, &m, &so);
    if (rc) goto done;
    if (port_file) {
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%d\n", serve_port(s));
        if ((rc = file_write_atomic(port_file, buf, (size_t)n))) goto done;
    }
    fprintf(stderr, "serve: listening on http://%s%s%s:%d/ (%s, %d tokens per window, stride %d, %d windows per forward, %s)\n",
            strchr(bind, ':') ? "[" : "", bind, strchr(bind, ':') ? "]" : "", serve_port(s), m.info.desc, T, stride, rows,
            pack == PACKING_VARLEN ? "packed: real tokens only" : "padded");
    if (key) fprintf(stderr, "serve: every request but GET /health needs the API key (from %s)\n", key_from);
    cli_warn_open_bind("serve --bind", bind, key != NULL);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "serve: %s: finishing the requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
done:
    if (s) {
        serve_stop(s, grace_s);
        fprintf(stderr, "serve: stopped\n");
    }
    qa_model_free(&m);
    if (key) memset(key, 0, strlen(key));
    free(key);
    return rc;
}
