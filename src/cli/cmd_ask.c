/* bertc ask: one question about one context, answered on the spot. */
#include "cli/options.h"
#include "core/alloc.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "infer/adhoc.h"
#include "infer/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_ask_summary[] = "answer one question about a text: the answer, its score and the context around it";

/* Prints text[b, e) of the context's code points. */
static void put_cps(const squad_context *c, int b, int e)
{
    if (b < 0) b = 0;
    if (e > c->ncp) e = c->ncp;
    if (e > b) fwrite(c->text + c->cp_byte[b], 1, (size_t)(c->cp_byte[e] - c->cp_byte[b]), stdout);
}

int cmd_ask(int argc, char **argv)
{
    const char *model_dir = NULL, *context = NULL, *question = NULL;
    cli_window win = CLI_WINDOW_DEFAULT;
    cli_device dev = CLI_DEVICE_DEFAULT;
    int threads = 0, nbest = 1, max_ans = PREDICT_MAX_ANSWER_LENGTH, around = 80;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model_dir, "DIR", "model dir (e.g. RUN/final)", .required = 1},
        {"context", ARG_STR, &context, "TEXT|@FILE", "the text to search (@FILE reads a UTF-8 file)", .required = 1},
        {"question", ARG_STR, &question, "TEXT", "the question", .required = 1},
        {"nbest", ARG_INT, &nbest, "K", "print the K best answers", .min = 1, .max = 20},
        CLI_WINDOW_SPECS(&win),
        {"max-answer-length", ARG_INT, &max_ans, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"around", ARG_INT, &around, "N", "characters of context shown on each side", .min = 0, .max = 100000},
        {"threads", ARG_INT, &threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        CLI_DEVICE_SPECS(&dev),
        {0},
    };
    int rc = args_parse("ask", "bertc ask --model DIR --context TEXT|@FILE --question TEXT [--nbest K] [options]", specs,
                        argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = cli_check_window("ask", &win))) return rc;
    int T = win.T, stride = win.stride;
    backend_opts bo;
    if ((rc = cli_answer_backend_opts("ask", &dev, threads, &bo))) return rc;
    char *text;
    size_t n;
    if (context[0] == '@') {
        rc = file_read_all(context + 1, &text, &n);
        if (rc) return err_wrap(rc, "ask --context");
    } else {
        text = xstrdup(context);
        n = strlen(text);
    }
    squad_data d;
    const char *ctx_text = text, *id = "question";
    rc = adhoc_data(&d, 1, &ctx_text, &n, &question, &id, context[0] == '@' ? context + 1 : "--context");
    free(text);
    if (rc) return rc;
    qa_model m;
    features f;
    int have_f = 0;
    infer_result r = {0};
    rc = qa_model_load(&m, model_dir, 42);
    if (rc) goto done;
    rc = qa_model_select(&m, &bo);
    if (rc) goto done;
    if (m.qa_initialised) log_warn("%s has no qa_outputs: the answer comes from a random QA head", model_dir);
    qa_model_fit_window(&m, &T, win.T_given, &stride, win.stride_given);
    feature_opts fo = {T, stride, 0, 0};
    rc = features_build(&d, m.tok, &fo, threads, &f);
    if (rc) goto done;
    have_f = 1;
    if (f.n == 0) {
        rc = err_set(ERR_INPUT, "ask: the question leaves no room for the context in %d tokens", T);
        goto done;
    }
    rc = qa_model_start(&m, &bo, f.n < 16 ? f.n : 16, T);
    infer_params ip = {.model = &m, .data = &d, .f = &f,
                       .post = {.n_best = PREDICT_N_BEST, .max_answer_length = max_ans}};
    if (!rc) rc = infer_run(&ip, &r);
    if (rc) goto done;
    const qa_predictions *p = &r.pred;
    const squad_context *c = &d.contexts[0];
    int k = p->n_nbest[0] < nbest ? p->n_nbest[0] : nbest;
    for (int i = 0; i < k; i++) {
        const qa_answer *a = &p->nbest[0][i];
        if (k > 1) printf("%d. ", i + 1);
        printf("answer: %s\n", a->text);
        printf("%sscore: %.4f (start %.4f + end %.4f), probability %.4f\n", k > 1 ? "   " : "", (double)a->score,
               (double)a->start_logit, (double)a->end_logit, a->probability);
        if (a->begin_cp >= 0) {
            printf("%scontext: %s", k > 1 ? "   " : "", a->begin_cp - around > 0 ? "..." : "");
            put_cps(c, a->begin_cp - around, a->begin_cp);
            printf("[");
            put_cps(c, a->begin_cp, a->end_cp);
            printf("]");
            put_cps(c, a->end_cp, a->end_cp + around);
            printf("%s\n", a->end_cp + around < c->ncp ? "..." : "");
        }
    }
done:
    infer_result_free(&r);
    if (have_f) features_free(&f);
    qa_model_free(&m);
    squad_free(&d);
    return rc;
}
