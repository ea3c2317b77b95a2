/* bertc train: fine-tune a BERT model dir for extractive QA (trainer.h). */
#include "core/args.h"
#include "core/err.h"
#include "train/supervise.h"
#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>

const char cmd_train_summary[] = "fine-tune a model for question answering, with checkpoints and exact resume";

int cmd_train(int argc, char **argv)
{
    trainer_opts o;
    trainer_opts_default(&o);
    const char *micro = "auto";
    int64_t seed = o.seed;
    int supervise = 0;
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
        {"device", ARG_STR, &o.device, "D", "auto|cpu|cuda (auto: the GPU when there is a usable one, else the CPU)", .min = 0},
        {"precision", ARG_STR, &o.precision, "P", "auto|fp32|tf32|fp16|bf16 (auto: bf16 from compute 8.0, fp16 below, fp32 on the CPU)", .min = 0},
        {"gpu", ARG_INT, &o.gpu, "N", "the CUDA device to train on", .min = 0, .max = 1023},
        {"gpu-mem-limit", ARG_SIZE, &o.gpu_mem_limit, "SIZE", "most device memory to allocate, e.g. 15GiB (0 = no limit)", .min = 0},
        {"recompute", ARG_STR, &o.recompute, "MODE", "none|layer: layer keeps only each layer's input and recomputes the rest in backward (less memory, ~1/3 more compute, same results)", .min = 0},
        {"save-every", ARG_I64, &o.save_every, "N", "checkpoint every N steps (0 = off)", .min = 0, .max = 1e12},
        {"save-every-minutes", ARG_DOUBLE, &o.save_every_minutes, "M", "checkpoint every M minutes (0 = off)", .min = 0, .max = 1e7},
        {"keep", ARG_INT, &o.keep, "K", "checkpoints to keep (0 = all)", .min = 0, .max = 1000000},
        {"resume", ARG_STR, &o.resume, "auto|never|PATH", "auto: newest valid checkpoint of RUN; never: start over", .min = 0},
        {"eval-every", ARG_I64, &o.eval_every, "N", "evaluate on --dev every N steps (0 = at the end only)", .min = 0, .max = 1e12},
        {"threads", ARG_INT, &o.threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        {"log-every", ARG_I64, &o.log_every, "N", "steps between progress lines when stdout is not a terminal", .min = 1, .max = 1e12},
        {"monitor-interval", ARG_DOUBLE, &o.monitor_interval, "S", "seconds between resource samples (0 = off)", .min = 0, .max = 86400},
        {"n-best", ARG_INT, &o.n_best, "N", "candidates per window in post-processing", .min = 1, .max = 1000},
        {"max-answer-length", ARG_INT, &o.max_answer_length, "N", "longest answer in tokens", .min = 1, .max = 8192},
        {"packing", ARG_STR, &o.packing, "P", "none|varlen (varlen: micro-batches of real tokens only, no padding computed; the loss's softmax over each window's own tokens)", .min = 0},
        {"max-tokens", ARG_INT, &o.max_tokens, "N", "with --packing varlen: real tokens per micro-batch (default micro-batch x T, or the planner's on a GPU)", .min = 1, .max = 1 << 30},
        {"supervise", ARG_INT, &supervise, "N", "restart the trainer after a crash or kill, up to N times (resuming)", .min = 0, .max = SUPERVISE_MAX_RESTARTS},
        {0},
    };
    int rc = args_parse("train", "bertc train --model DIR --train FILE --out RUN [--dev FILE] [options]", specs, argc,
                        argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    o.seed = seed;
    if (strcmp(micro, "auto") != 0) {
        int64_t v;
        rc = parse_int64(micro, 1, 1 << 20, "train --micro-batch", &v);
        if (rc) return rc;
        o.micro_batch = (int)v;
    }
    rc = trainer_opts_check(&o);
    if (rc) return rc;
    if (supervise > 0) return supervise_run(supervise, argc, argv, o.out_dir);
    return trainer_run(&o);
}
