/* bertc predict: answers for every question of a SQuAD-format file. */
#include "cli/options.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "infer/qa_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_predict_summary[] = "answer the questions of a SQuAD-format file (predictions.json)";

static int dump_logits(const char *dir, const features *f, const float *start, const float *end)
{
    int rc = mkdir_p(dir);
    if (rc) return rc;
    int64_t shape[2] = {f->n, f->T};
    char p[4096];
    rc = npy_write_f32(path_join(p, sizeof p, dir, "start_logits.npy"), start, 2, shape);
    if (!rc) rc = npy_write_f32(path_join(p, sizeof p, dir, "end_logits.npy"), end, 2, shape);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    const char *model_dir = NULL, *data_path = NULL, *out = NULL, *nbest = NULL, *dump = NULL;
    const char *device = "auto", *precision = "auto";
    int T = 384, stride = 128, T_given = 0, stride_given = 0, mql = 0, batch = 32, threads = 0, gpu = 0, n_best = PREDICT_N_BEST;
    int max_ans = PREDICT_MAX_ANSWER_LENGTH;
    const char *packing = "none";
    int max_tokens = 0, max_tokens_given = 0;
    int v2 = 0, thr_given = 0;
    double null_thr = 0.0;
    const char *null_odds = NULL;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model_dir, "DIR", "model dir (e.g. RUN/final)", .required = 1},
        {"data", ARG_STR, &data_path, "FILE", "questions, SQuAD format", .required = 1},
        {"out", ARG_STR, &out, "PRED.json", "predictions {\"id\": \"answer\"}", .required = 1},
        {"nbest", ARG_STR, &nbest, "FILE", "also write the n-best answers with probabilities", .min = 0},
        {"dump", ARG_STR, &dump, "DIR", "also write start_logits.npy, end_logits.npy [windows, T]", .min = 0},
        {"max-seq-length", ARG_INT, &T, "N", "tokens per window (default 384, or the model's max_position_embeddings when smaller)",
         .min = 8, .max = 8192, .seen = &T_given},
        {"doc-stride", ARG_INT, &stride, "N", "overlap of context windows, in tokens (default 128; T / 4 with a shorter default T)",
         .min = 0, .max = 8191, .seen = &stride_given},
        {"max-query-length", ARG_INT, &mql, "N", "truncate questions to N tokens (0 = never)", .min = 0, .max = 8192},
        {"batch", ARG_INT, &batch, "N", "windows per forward pass", .min = 1, .max = 65536},
        {"threads", ARG_INT, &threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        {"device", ARG_STR, &device, "D", "auto|cpu|cuda (auto: the GPU when there is a usable one)", .min = 0},
        {"precision", ARG_STR, &precision, "P", "auto|fp32|tf32|fp16|bf16 (the CPU computes in fp32)", .min = 0},
        {"gpu", ARG_INT, &gpu, "N", "the CUDA device to use", .min = 0, .max = 1023},
        {"n-best", ARG_INT, &n_best, "N", "candidates per window", .min = 1, .max = 1000},
        {"max-answer-length", ARG_INT, &max_ans, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"packing", ARG_STR, &packing, "P",
         "none|varlen (varlen: windows grouped by length, real tokens only; padding logits -inf)", .min = 0},
        {"max-tokens", ARG_INT, &max_tokens, "N", "with --packing varlen: real tokens per forward pass (default batch x T)",
         .min = 1, .max = 1 << 30, .seen = &max_tokens_given},
        {"version-2-with-negative", ARG_FLAG, &v2, NULL, "SQuAD 2.0: the answer may be \"\" (the null answer, as run_qa.py)", .min = 0},
        {"null-score-diff-threshold", ARG_DOUBLE, &null_thr, "X", "with --version-2-with-negative: answer \"\" when the null score beats the best span's by more than X (default 0.0)", .min = -1e9, .max = 1e9, .seen = &thr_given},
        {"null-odds", ARG_STR, &null_odds, "FILE", "with --version-2-with-negative: also write null_odds.json {\"id\": null score - best span score} (bertc eval --na-prob-file)", .min = 0},
        {0},
    };
    int rc = args_parse("predict",
                        "bertc predict --model DIR --data FILE --out PRED.json [--nbest FILE] [--dump DIR] [options]\n"
                        "       bertc predict --version-2-with-negative ... [--null-odds NULL_ODDS.json] [--null-score-diff-threshold X]",
                        specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((T_given || stride_given) && stride >= T)
        return err_set(ERR_INPUT, "predict: --doc-stride %d must be below --max-seq-length %d", stride, T);
    packing_kind pack;
    if ((rc = cli_parse_packing("predict", packing, &pack))) return rc;
    if (max_tokens_given && pack != PACKING_VARLEN)
        return err_set(ERR_INPUT, "predict: --max-tokens needs --packing varlen");
    if (path_is_dir(out)) return err_set(ERR_INPUT, "--out %s: is a directory (give the predictions file's path)", out);
    if (!v2 && (null_odds || thr_given))
        return err_set(ERR_INPUT, "predict: --null-odds and --null-score-diff-threshold need --version-2-with-negative");
    if (null_odds && path_is_dir(null_odds))
        return err_set(ERR_INPUT, "--null-odds %s: is a directory (give the file's path)", null_odds);
    backend_opts bo = backend_opts_default();
    if ((rc = cli_parse_device("predict", device, &bo.device)) ||
        (rc = cli_parse_precision("predict", precision, &bo.precision)))
        return rc;
    bo.threads = threads;
    bo.gpu = gpu;
    bo.batch_invariant = 1; /* a question's answers do not depend on the other windows in its batch */
    double t0 = clock_now_s();
    qa_model m;
    squad_data d;
    features f;
    int have_d = 0, have_f = 0;
    float *start = NULL, *end = NULL;
    qa_predictions p = {0};
    rc = qa_model_load(&m, model_dir, 42);
    if (rc) return rc;
    /* A --device/--precision the machine cannot honour fails before the data is read. */
    rc = qa_model_select(&m, &bo);
    if (rc) goto done;
    if (m.qa_initialised) log_warn("%s has no qa_outputs: answers come from a random QA head", model_dir);
    rc = squad_load(data_path, &d);
    if (rc) goto done;
    have_d = 1;
    qa_model_fit_window(&m, &T, T_given, &stride, stride_given);
    feature_opts fo = {T, stride, mql, v2};
    rc = features_build(&d, m.tok, &fo, threads, &f);
    if (rc) goto done;
    have_f = 1;
    m.packing = pack;
    m.max_tokens = max_tokens_given ? max_tokens : 0;
    rc = qa_model_start(&m, &bo, f.n < batch ? (f.n > 0 ? f.n : 1) : batch, T);
    if (rc) goto done;
    size_t n = (size_t)f.n * (size_t)T;
    start = malloc((n ? n : 1) * sizeof *start);
    end = malloc((n ? n : 1) * sizeof *end);
    if (!start || !end) {
        rc = err_set(ERR_RUNTIME, "out of memory for the logits of %d windows", f.n);
        goto done;
    }
    rc = qa_model_logits(&m, &f, start, end, NULL);
    if (!rc && dump) rc = dump_logits(dump, &f, start, end);
    postprocess_opts po = {.n_best = n_best, .max_answer_length = max_ans, .version_2_with_negative = v2,
                           .null_score_diff_threshold = null_thr};
    if (!rc) rc = postprocess_predictions(&d, &f, start, end, &po, &p);
    if (!rc) rc = predictions_write_json(out, &d, &p);
    if (!rc && nbest) rc = nbest_write_json(nbest, &d, &p);
    if (!rc && null_odds) rc = null_odds_write_json(null_odds, &d, &p);
    if (!rc)
        fprintf(stderr, "predict: %d questions, %d windows, %.1fs -> %s\n", d.n, f.n, clock_now_s() - t0, out);
done:
    qa_predictions_free(&p);
    free(start);
    free(end);
    if (have_f) features_free(&f);
    if (have_d) squad_free(&d);
    qa_model_free(&m);
    return rc;
}
