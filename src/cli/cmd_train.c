/* bertc train: fine-tune a BERT model dir for extractive QA (trainer.h). */
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "comm/dist.h"
#include "core/fileio.h"
#include "model/tf_bert.h"
#include "train/pipeline.h"
#include "train/supervise.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_train_summary[] = "fine-tune a model for question answering, with checkpoints and exact resume";

static int train_main(int argc, char **argv);

/* Under mpirun/srun (src/comm): MPI from the start, every rank checked to
 * run the same binary with the same arguments, MPI finalized on every
 * path out (so no rank leaves the launcher a half-ended job). */
int cmd_train(int argc, char **argv)
{
    int rc = dist_init(&argc, &argv);
    if (!rc) rc = dist_check_hash(dist_hash_binary(), "the bertc binaries");
    if (!rc) rc = dist_check_hash(dist_hash_invocation(argc, argv), "the arguments");
    if (!rc && dist_rank() > 0) log_quiet(1); /* rank 0 alone tells */
    if (!rc) rc = train_main(argc, argv);
    return dist_end(rc);
}

/* The live page's API key: *key malloc'ed, or NULL for none (no --http, or
 * no key given anywhere). */
static int live_page_key(const cli_api_key_opts *ak, int http_port, char **key)
{
    *key = NULL;
    if ((ak->key || ak->file) && http_port < 0)
        return err_set(ERR_INPUT, "train %s: there is no live page to protect (add --http PORT)",
                       ak->key ? "--api-key" : "--api-key-file");
    return http_port >= 0 ? cli_api_key("train", ak, key, NULL) : 0;
}

/* The options parsed and checked: the live page's key, then the
 * supervisor, or a TF checkpoint's conversion and the trainer. */
static int train_start(trainer_opts *o, const cli_api_key_opts *ak, int supervise, int argc, char **argv)
{
    int rc;
    /* Read here (a bad key file stops the run before it starts); the
     * supervisor's children read it again, as they parse the same options. */
    char *key = NULL;
    if ((rc = live_page_key(ak, o->http_port, &key))) return rc;
    if (supervise > 0) {
        free(key);
        return supervise_run(supervise, argc, argv, o->out_dir);
    }
    o->http_api_key = key;
    if (o->http_port >= 0 && dist_rank() == 0) /* rank 0 alone serves the page (data parallel) */
        cli_warn_open_bind("train --http-bind", o->http_bind, key != NULL);
    /* A Google BERT dir (TF checkpoint): converted into RUN/init_model at
     * every start (the same bytes each time, so a resume's fingerprint
     * still matches), and trained from there. */
    char init_dir[4096];
    if (tf_bert_is_google_dir(o->model_dir)) {
        path_join(init_dir, sizeof init_dir, o->out_dir, "init_model");
        /* Rank 0 converts, the others wait for it (with one process the
         * agreement is its own code). */
        rc = dist_rank() == 0 ? tf_bert_export_dir(o->model_dir, init_dir, -1, (uint64_t)o->seed, NULL) : 0;
        rc = dist_agree(rc);
        if (rc) {
            free(key);
            return rc;
        }
        log_info("train: %s is a TensorFlow checkpoint: converted into %s", o->model_dir, init_dir);
        o->model_dir = init_dir;
    }
    rc = trainer_run(o);
    if (key) memset(key, 0, strlen(key));
    free(key);
    return rc;
}

static int train_main(int argc, char **argv)
{
    trainer_opts o;
    trainer_opts_default(&o);
    const char *micro = "auto", *device = "auto", *precision = "auto", *recompute = "none", *packing = "none";
    const char *resume = "auto", *split = NULL, *eval_precision = "auto";
    int64_t seed = o.seed;
    int supervise = 0;
    cli_api_key_opts ak = {0};
    const arg_spec specs[] = {
        {"model", ARG_STR, &o.model_dir, "DIR", "Hugging Face model dir (config.json, model.safetensors, vocab.txt)", .required = 1},
        {"train", ARG_STR, &o.train_path, "FILE", "training data, SQuAD format", .required = 1},
        {"out", ARG_STR, &o.out_dir, "RUN", "run dir: checkpoints, metrics, final model", .required = 1},
        {"dev", ARG_STR, &o.dev_path, "FILE", "evaluation data, SQuAD format", .min = 0},
        {"max-seq-length", ARG_INT, &o.max_seq_length, "N", "tokens per window", .min = 8, .max = 8192},
        {"doc-stride", ARG_INT, &o.doc_stride, "N", "overlap of context windows, in tokens", .min = 0, .max = 8191},
        {"max-query-length", ARG_INT, &o.max_query_length, "N", "truncate questions to N tokens (0 = never)", .min = 0, .max = 8192},
        {"epochs", ARG_DOUBLE, &o.epochs, "X", "passes over the training features", .min = 1e-9, .max = 1e6},
        {"max-steps", ARG_I64, &o.max_steps, "N", "optimizer steps; overrides --epochs when > 0", .min = 0, .max = 1e12},
        {"batch", ARG_INT, &o.batch, "N", "examples (windows) per optimizer step", .min = 1, .max = 1 << 20},
        {"micro-batch", ARG_STR, &micro, "N|auto", "windows per forward/backward, accumulated up to --batch (auto: the largest the memory planner fits on the GPU; halved on out of memory)", .min = 0},
        {"lr", ARG_DOUBLE, &o.lr, "X", "peak learning rate", .min = 0, .max = 10},
        {"warmup", ARG_DOUBLE, &o.warmup, "X", "warm-up: a fraction of the steps (< 1) or a number of steps", .min = 0, .max = 1e12},
        {"weight-decay", ARG_DOUBLE, &o.weight_decay, "X", "AdamW weight decay (not biases, LayerNorm)", .min = 0, .max = 10},
        {"adam-eps", ARG_DOUBLE, &o.adam_eps, "X", "AdamW epsilon", .min = 0, .max = 1},
        {"clip", ARG_DOUBLE, &o.clip, "X", "max gradient norm (0 = no clipping)", .min = 0, .max = 1e9},
        {"dropout", ARG_DOUBLE, &o.dropout, "P", "dropout probability for hidden and attention (default: the config's)", .min = 0, .max = 0.99},
        {"seed", ARG_I64, &seed, "N", "seed of shuffling, dropout and qa_outputs init", .min = 0, .max = 9.2e18},
        {"no-shuffle", ARG_FLAG_OFF, &o.shuffle, NULL, "keep the data order", .min = 0},
        {"device", ARG_STR, &device, "D", "auto|cpu|cuda (auto: the GPU when there is a usable one, else the CPU)", .min = 0},
        {"precision", ARG_STR, &precision, "P", "auto|fp32|tf32|fp16|bf16 (auto: bf16 from compute 8.0, fp16 below, fp32 on the CPU; bf16 on a CPU with AVX512-BF16 runs the linear layers in bf16)", .min = 0},
        {"gpu", ARG_INT, &o.gpu, "N", "the CUDA device to train on", .min = 0, .max = 1023},
        {"gpu-mem-limit", ARG_SIZE, &o.gpu_mem_limit, "SIZE", "most device memory to allocate, e.g. 15GiB (0 = no limit)", .min = 0},
        {"recompute", ARG_STR, &recompute, "MODE", "none|layer: layer keeps only each layer's input and recomputes the rest in backward (less memory, ~1/3 more compute, same results)", .min = 0},
        {"save-every", ARG_I64, &o.save_every, "N", "checkpoint every N steps (0 = off)", .min = 0, .max = 1e12},
        {"save-every-minutes", ARG_DOUBLE, &o.save_every_minutes, "M", "checkpoint every M minutes (0 = off)", .min = 0, .max = 1e7},
        {"keep", ARG_INT, &o.keep, "K", "checkpoints to keep (0 = all)", .min = 0, .max = 1000000},
        {"resume", ARG_STR, &resume, "auto|never|PATH", "auto: newest valid checkpoint of RUN; never: start over", .min = 0},
        {"eval-precision", ARG_STR, &eval_precision, "P", "auto|fp32|bf16|int8: the evaluation's linear layers on the CPU (auto: fp32; bf16 needs AVX512-BF16, int8 AVX2)", .min = 0},
        {"eval-every", ARG_I64, &o.eval_every, "N", "evaluate on --dev every N steps (0 = at the end only)", .min = 0, .max = 1e12},
        {"threads", ARG_INT, &o.threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        {"log-every", ARG_I64, &o.log_every, "N", "steps between progress lines when stdout is not a terminal", .min = 1, .max = 1e12},
        {"monitor-interval", ARG_DOUBLE, &o.monitor_interval, "S", "seconds between resource samples (0 = off)", .min = 0, .max = 86400},
        {"n-best", ARG_INT, &o.n_best, "N", "candidates per window in post-processing", .min = 1, .max = 1000},
        {"max-answer-length", ARG_INT, &o.max_answer_length, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"packing", ARG_STR, &packing, "P", "none|varlen (varlen: micro-batches of real tokens only, no padding computed; the loss's softmax over each window's own tokens)", .min = 0},
        {"max-tokens", ARG_INT, &o.max_tokens, "N", "with --packing varlen: real tokens per micro-batch (default micro-batch x T, or the planner's on a GPU)", .min = 1, .max = 1 << 30},
        {"version-2-with-negative", ARG_FLAG, &o.version_2_with_negative, NULL, "SQuAD 2.0: unanswerable (is_impossible) questions trained at [CLS]; --dev scored with evaluate-v2.0.py's metric, RUN/null_odds.json", .min = 0},
        {"null-score-diff-threshold", ARG_DOUBLE, &o.null_score_diff_threshold, "X", "with --version-2-with-negative: answer \"\" when the null score beats the best span's by more than X (default 0.0)", .min = -1e9, .max = 1e9},
        {"http", ARG_INT, &o.http_port, "PORT", "serve a live page (charts, progress, /api/status, /metrics) on this port while training (0 = any free port; default: no page)", .min = 0, .max = 65535},
        {"http-bind", ARG_STR, &o.http_bind, "ADDR", "address of the live page (0.0.0.0: every interface)", .min = 0},
        CLI_API_KEY_SPECS(&ak, "the live page (--http)"),
        {"mirror", ARG_STR, &o.mirror_dir, "DIR", "copy each checkpoint to DIR/checkpoints in the background (a mounted Drive); --resume auto looks there when RUN has none", .min = 0},
        {"mirror-keep", ARG_INT, &o.mirror_keep, "K", "checkpoints kept in the mirror (default: as --keep; 0 = all)", .min = 0, .max = 1000000},
        {"shard-optimizer", ARG_FLAG, &o.shard_optimizer, NULL, "data parallel (mpirun -np N, N >= 2): each rank keeps the AdamW moments of 1/N of the parameters (ZeRO stage 1: gradients reduce-scattered, each rank updates its part, parameters all-gathered); the same results to rounding, checkpoints as without it", .min = 0},
        {"pipeline-stages", ARG_INT, &o.pipeline_stages, "S", "pipeline model parallelism under mpirun/srun: the encoder layers in S stages of contiguous layers, one rank each (ranks = S x D: D data-parallel copies of the pipeline); micro-batches flow through the stages in a 1F1B schedule; the same results as one process (default 1: none)", .min = 1, .max = PIPE_MAX_STAGES},
        {"pipeline-split", ARG_STR, &split, "LIST", "with --pipeline-stages S: the S+1 layer boundaries, e.g. 0,5,12 (stage s holds layers [b_s, b_s+1); default: bertc plan's, the smallest largest stage time, then the smallest largest stage peak)", .min = 0},
        {"supervise", ARG_INT, &supervise, "N", "restart the trainer after a crash or kill, up to N times (resuming)", .min = 0, .max = SUPERVISE_MAX_RESTARTS},
        {0},
    };
    int rc = args_parse("train", "bertc train --model DIR --train FILE --out RUN [--dev FILE] [options]", specs, argc,
                        argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    o.seed = seed;
    if ((rc = cli_parse_device("train", device, &o.device)) ||
        (rc = cli_parse_precision("train", precision, &o.precision)) ||
        (rc = cli_parse_answer_precision("train --eval-precision", eval_precision, &o.eval_precision)) ||
        (rc = cli_parse_recompute("train", recompute, &o.recompute)) ||
        (rc = cli_parse_packing("train", packing, &o.packing)))
        return rc;
    if (o.eval_precision == PREC_TF32 || o.eval_precision == PREC_FP16)
        return err_set(ERR_INPUT, "train --eval-precision: '%s' is not one of auto, fp32, bf16, int8", eval_precision);
    cli_parse_resume(resume, &o.resume, &o.resume_path);
    if (strcmp(micro, "auto") != 0) {
        int64_t v;
        rc = parse_int64(micro, 1, 1 << 20, "train --micro-batch", &v);
        if (rc) return rc;
        o.micro_batch = (int)v;
    }
    rc = trainer_opts_check(&o);
    if (rc) return rc;
    if (split && (rc = cli_parse_pipeline_split("train", split, o.pipeline_stages, o.pipeline_split,
                                                &o.pipeline_split_n)))
        return rc;
    rc = trainer_opts_check_job(&o);
    if (rc) return rc;
    if (supervise > 0 && dist_launched())
        return err_set(ERR_INPUT, "train --supervise: cannot restart one rank of an mpirun/srun job alone; rerun "
                       "the same mpirun command (it resumes from the last checkpoint), or let the job script do it");
    return train_start(&o, &ak, supervise, argc, argv);
}
