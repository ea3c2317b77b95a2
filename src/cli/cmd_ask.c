/* bertc ask: one question about one context, answered on the spot. */
#include "cli/options.h"
#include "core/alloc.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "infer/adhoc.h"
#include "infer/qa_model.h"

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
    const char *model_dir = NULL, *context = NULL, *question = NULL, *device = "auto", *precision = "auto";
    int T = 384, stride = 128, T_given = 0, stride_given = 0, threads = 0, gpu = 0, nbest = 1, max_ans = PREDICT_MAX_ANSWER_LENGTH, around = 80;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model_dir, "DIR", "model dir (e.g. RUN/final)", .required = 1},
        {"context", ARG_STR, &context, "TEXT|@FILE", "the text to search (@FILE reads a UTF-8 file)", .required = 1},
        {"question", ARG_STR, &question, "TEXT", "the question", .required = 1},
        {"nbest", ARG_INT, &nbest, "K", "print the K best answers", .min = 1, .max = 20},
        {"max-seq-length", ARG_INT, &T, "N", "tokens per window (default 384, or the model's max_position_embeddings when smaller)",
         .min = 8, .max = 8192, .seen = &T_given},
        {"doc-stride", ARG_INT, &stride, "N", "overlap of context windows, in tokens (default 128; T / 4 with a shorter default T)",
         .min = 0, .max = 8191, .seen = &stride_given},
        {"max-answer-length", ARG_INT, &max_ans, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"around", ARG_INT, &around, "N", "characters of context shown on each side", .min = 0, .max = 100000},
        {"threads", ARG_INT, &threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        {"device", ARG_STR, &device, "D", "auto|cpu|cuda (auto: the GPU when there is a usable one)", .min = 0},
        {"precision", ARG_STR, &precision, "P", "auto|fp32|tf32|fp16|bf16 (the CPU computes in fp32)", .min = 0},
        {"gpu", ARG_INT, &gpu, "N", "the CUDA device to use", .min = 0, .max = 1023},
        {0},
    };
    int rc = args_parse("ask", "bertc ask --model DIR --context TEXT|@FILE --question TEXT [--nbest K] [options]", specs,
                        argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((T_given || stride_given) && stride >= T)
        return err_set(ERR_INPUT, "ask: --doc-stride %d must be below --max-seq-length %d", stride, T);
    backend_opts bo = backend_opts_default();
    if ((rc = cli_parse_device("ask", device, &bo.device)) || (rc = cli_parse_precision("ask", precision, &bo.precision)))
        return rc;
    bo.threads = threads;
    bo.gpu = gpu;
    bo.batch_invariant = 1; /* a question's answers do not depend on the other windows in its batch */
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
    qa_predictions p = {0};
    rc = qa_model_load(&m, model_dir, 42);
    if (rc) goto done;
    rc = qa_model_select(&m, &bo);
    if (rc) goto done;
    if (m.qa_initialised) log_warn("%s has no qa_outputs: the answer comes from a random QA head", model_dir);
    qa_model_fit_window(&m, &T, T_given, &stride, stride_given);
    feature_opts fo = {T, stride, 0, 0};
    rc = features_build(&d, m.tok, &fo, threads, &f);
    if (rc) goto done;
    have_f = 1;
    if (f.n == 0) {
        rc = err_set(ERR_INPUT, "ask: the question leaves no room for the context in %d tokens", T);
        goto done;
    }
    rc = qa_model_start(&m, &bo, f.n < 16 ? f.n : 16, T);
    postprocess_opts po = {.n_best = PREDICT_N_BEST, .max_answer_length = max_ans};
    if (!rc) rc = qa_model_predict(&m, &d, &f, &po, &p, NULL);
    if (rc) goto done;
    const squad_context *c = &d.contexts[0];
    int k = p.n_nbest[0] < nbest ? p.n_nbest[0] : nbest;
    for (int i = 0; i < k; i++) {
        const qa_answer *a = &p.nbest[0][i];
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
    qa_predictions_free(&p);
    if (have_f) features_free(&f);
    qa_model_free(&m);
    squad_free(&d);
    return rc;
}
