/* bertc predict: answers for every question of a SQuAD-format file. */
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "infer/infer.h"

const char cmd_predict_summary[] = "answer the questions of a SQuAD-format file (predictions.json)";

int cmd_predict(int argc, char **argv)
{
    const char *model_dir = NULL, *data_path = NULL, *out = NULL, *nbest = NULL, *dump = NULL;
    cli_window win = CLI_WINDOW_DEFAULT;
    cli_device dev = CLI_DEVICE_DEFAULT;
    int mql = 0, batch = 32, threads = 0, n_best = PREDICT_N_BEST;
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
        CLI_WINDOW_SPECS(&win),
        {"max-query-length", ARG_INT, &mql, "N", "truncate questions to N tokens (0 = never)", .min = 0, .max = 8192},
        {"batch", ARG_INT, &batch, "N", "windows per forward pass", .min = 1, .max = 65536},
        {"threads", ARG_INT, &threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        CLI_DEVICE_SPECS(&dev),
        {"n-best", ARG_INT, &n_best, "N", "candidates per window", .min = 1, .max = 1000},
        {"max-answer-length", ARG_INT, &max_ans, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"packing", ARG_STR, &packing, "P",
         "none|varlen (varlen: windows grouped by length, real tokens only; padding logits -inf)", .min = 0},
        {"max-tokens", ARG_INT, &max_tokens, "N", "with --packing varlen: real tokens per forward pass (default: batch x T on a GPU; on the CPU what keeps about 12 MiB of FFN activations, 2048 for a model of intermediate size 1536)",
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
    if ((rc = cli_check_window("predict", &win))) return rc;
    int T = win.T, stride = win.stride;
    packing_kind pack;
    if ((rc = cli_parse_packing("predict", packing, &pack))) return rc;
    if (max_tokens_given && pack != PACKING_VARLEN)
        return err_set(ERR_INPUT, "predict: --max-tokens needs --packing varlen");
    if (path_is_dir(out)) return err_set(ERR_INPUT, "--out %s: is a directory (give the predictions file's path)", out);
    if (!v2 && (null_odds || thr_given))
        return err_set(ERR_INPUT, "predict: --null-odds and --null-score-diff-threshold need --version-2-with-negative");
    if (null_odds && path_is_dir(null_odds))
        return err_set(ERR_INPUT, "--null-odds %s: is a directory (give the file's path)", null_odds);
    backend_opts bo;
    if ((rc = cli_answer_backend_opts("predict", &dev, threads, &bo))) return rc;
    infer_params ip = {.model_dir = model_dir, .bo = &bo, .T = T, .T_given = win.T_given, .stride = stride,
                       .stride_given = win.stride_given, .max_query_length = mql, .batch = batch, .threads = threads,
                       .packing = pack, .max_tokens = max_tokens_given ? max_tokens : 0, .data_path = data_path,
                       .post = {.n_best = n_best, .max_answer_length = max_ans, .version_2_with_negative = v2,
                                .null_score_diff_threshold = null_thr},
                       .dump_dir = dump, .pred_path = out, .nbest_path = nbest, .null_odds_path = null_odds,
                       .name = "predict"};
    infer_result r;
    rc = infer_run(&ip, &r);
    infer_result_free(&r);
    return rc;
}
