/* serve_req_parse (the body of POST /v1/answer) on arbitrary bytes: either
 * 0 with a request that keeps the limits (1..max_items items, contexts of
 * at most max_context bytes, valid UTF-8 without NUL, non-empty questions,
 * nbest in range) and that adhoc_data accepts, or 400/413 with a one-line
 * message. */
#include "fuzz.h"
#include "infer/adhoc.h"
#include "serve/serve_req.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    serve_limits lim = {1 << 16, 4096, 8, 20, 5};
    serve_req r;
    char msg[300];
    int st = serve_req_parse((const char *)data, size, &lim, &r, msg, sizeof msg);
    if (st) {
        FUZZ_ASSERT(st == 400 || st == 413, "status %d", st);
        FUZZ_ASSERT(msg[0] && !strchr(msg, '\n'), "message \"%s\"", msg);
        FUZZ_ASSERT(r.n == 0 && !r.context && !r.question, "a failed parse left %d items", r.n);
        return 0;
    }
    FUZZ_ASSERT(r.n >= 1 && r.n <= lim.max_items, "%d items", r.n);
    FUZZ_ASSERT(r.nbest >= 1 && r.nbest <= lim.max_nbest, "nbest %d", r.nbest);
    for (int k = 0; k < r.n; k++) {
        FUZZ_ASSERT(r.context[k] && r.question[k], "item %d", k);
        FUZZ_ASSERT(r.context_len[k] <= lim.max_context && strlen(r.context[k]) == r.context_len[k], "item %d", k);
        FUZZ_ASSERT(!utf8_find_invalid(r.context[k], r.context_len[k], NULL), "item %d: context not UTF-8", k);
        FUZZ_ASSERT(r.question[k][0] && !utf8_find_invalid(r.question[k], strlen(r.question[k]), NULL), "item %d", k);
    }
    squad_data d;
    int rc = adhoc_data(&d, r.n, (const char *const *)r.context, r.context_len, (const char *const *)r.question, NULL,
                        "context");
    FUZZ_ASSERT(rc == 0, "adhoc_data refused a parsed request: %s", err_msg());
    FUZZ_ASSERT(d.n == r.n && d.ncontexts == r.n, "%d examples", d.n);
    squad_free(&d);
    serve_req_free(&r);
    return 0;
}
