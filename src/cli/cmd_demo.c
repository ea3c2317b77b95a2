/* bertc demo: the whole pipeline in about two minutes on two CPU cores.
 *
 * 1. a synthetic SQuAD-format data set (data/synth.h) and its vocabulary,
 *    train and test split by entity;
 * 2. a small randomly initialised model (as `bertc init` makes one);
 * 3. a fine-tune with checkpoints on (as `bertc train`; run it again after
 *    an interruption and it resumes);
 * 4. the evaluation of the model and of trivial baselines on the test
 *    split. The last line on stdout is the model's evaluation exactly as
 *    `bertc eval RUN/data/test.json RUN/predictions.json` prints it. */
#include "core/alloc.h"
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "data/synth.h"
#include "eval/squad_eval.h"
#include "model/config.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/params.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cmd_demo_summary[] = "generate a toy data set, train a small model on it (~2 min on 2 cores), evaluate";

/* The recipe, tuned so that the model learns in about two minutes on two
 * cores (README.md and bench/RESULTS.md have the figures). The paragraphs
 * are three or four sentences: 48 tokens hold most of them with the
 * question, and the longer ones become two windows. */
enum {
    DEMO_TRAIN_PARAGRAPHS = 6000, /* and 1 in 15 of that for the test split */
    DEMO_T = 48,
    DEMO_STRIDE = 16,
    DEMO_BATCH = 16,
    DEMO_STEPS = 3300,
    DEMO_HEADS = 4, /* tiny has 2; four heads of 32 learn the matching sooner */
};
#define DEMO_LR 2e-3
#define DEMO_CONFIG "tiny"
/* transformers' 0.02 suits BERT-base's width; a model 128 wide trained from
 * scratch starts learning much sooner with weights of about 1/sqrt(128). */
#define DEMO_INIT_RANGE 0.1

static int make_model(const char *data_dir, const char *model_dir, uint64_t seed)
{
    char vocab[4096];
    path_join(vocab, sizeof vocab, data_dir, "vocab.txt");
    char *text;
    size_t len;
    int rc = file_read_all(vocab, &text, &len);
    if (rc) return rc;
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    free(text);
    bert_config cfg;
    rc = config_named(DEMO_CONFIG, lines, &cfg);
    if (rc) return rc;
    cfg.max_position_embeddings = 128;
    cfg.initializer_range = DEMO_INIT_RANGE;
    cfg.num_attention_heads = DEMO_HEADS;
    param_table t;
    param_table_init(&t, &cfg);
    float *block = malloc(t.total * sizeof *block);
    if (!block) {
        param_table_free(&t);
        return err_set(ERR_RUNTIME, "out of memory");
    }
    model_init_random(&cfg, &t, block, seed);
    rc = model_save(model_dir, &cfg, &t, block, data_dir);
    free(block);
    param_table_free(&t);
    return rc;
}

static int print_eval(const char *label, const char *data, const char *pred, int json)
{
    eval_result r;
    int rc = eval_files(data, pred, EVAL_METRIC_SQUAD, &r);
    if (rc) return rc;
    char buf[128];
    eval_result_json(&r, buf, sizeof buf);
    if (json) printf("%s\n", buf);
    else printf("  %-34s exact_match %6.2f  f1 %6.2f\n", label, r.exact_match, r.f1);
    return 0;
}

int cmd_demo(int argc, char **argv)
{
    const char *out = "runs/demo", *generate = NULL;
    int threads = 0, paragraphs = DEMO_TRAIN_PARAGRAPHS;
    int64_t steps = DEMO_STEPS, seed = 42, save_every = 500;
    double minutes = 0;
    const arg_spec specs[] = {
        {"out", ARG_STR, &out, "RUN", "run dir (data, model, checkpoints, results)", .min = 0},
        {"threads", ARG_INT, &threads, "N", "CPU threads (0 = all cores)", .min = 0, .max = 4096},
        {"steps", ARG_I64, &steps, "N", "optimizer steps (fewer for a quick look)", .min = 1, .max = 1000000},
        {"paragraphs", ARG_INT, &paragraphs, "N", "training paragraphs to generate (test: 1 in 15 of that)", .min = 15, .max = 1000000},
        {"seed", ARG_I64, &seed, "N", "seed of the data, the model and the training", .min = 0, .max = 9.2e18},
        {"save-every", ARG_I64, &save_every, "N", "checkpoint every N steps", .min = 0, .max = 1000000},
        {"save-every-minutes", ARG_DOUBLE, &minutes, "M", "checkpoint every M minutes too (0 = off)", .min = 0, .max = 1e6},
        {"generate", ARG_STR, &generate, "DIR", "only write the synthetic data set and its vocab to DIR", .min = 0},
        {0},
    };
    int rc = args_parse("demo", "bertc demo [--out RUN] [options]", specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    synth_opts so = synth_opts_default((uint64_t)seed, paragraphs, paragraphs / 15);
    synth_stats st;
    if (generate) {
        if (path_exists(generate) && !path_is_dir(generate))
            return err_set(ERR_INPUT, "--generate %s: exists and is not a directory", generate);
        rc = synth_generate(&so, generate, &st);
        if (!rc)
            printf("%s: train.json %d questions, test.json %d questions, vocab.txt %d tokens\n", generate,
                   st.train_questions, st.test_questions, st.vocab_size);
        return rc;
    }
    if (path_exists(out) && !path_is_dir(out)) return err_set(ERR_INPUT, "--out %s: exists and is not a directory", out);
    double t0 = clock_now_s();
    char data[4096], model[4096], train[4096], test[4096], pred[4096];
    snprintf(data, sizeof data, "%s/data", out);
    snprintf(model, sizeof model, "%s/init", out);
    path_join(train, sizeof train, data, "train.json");
    path_join(test, sizeof test, data, "test.json");
    path_join(pred, sizeof pred, out, "predictions.json");
    printf("bertc demo: a synthetic question-answering task, a small model trained from scratch, evaluation\n");
    /* Both are deterministic: a second run writes the same bytes, so an
     * interrupted demo resumes from its checkpoints. */
    rc = synth_generate(&so, data, &st);
    if (rc) return rc;
    printf("data: %s: %d train questions (%d paragraphs), %d test questions about other entities, vocab %d tokens\n",
           data, st.train_questions, st.train_paragraphs, st.test_questions, st.vocab_size);
    rc = make_model(data, model, (uint64_t)seed);
    if (rc) return rc;
    printf("model: %s: config %s with %d heads, random initialisation (seed %lld)\n", model, DEMO_CONFIG, DEMO_HEADS,
           (long long)seed);
    fflush(stdout);

    trainer_opts o;
    trainer_opts_default(&o);
    o.model_dir = model;
    o.train_path = train;
    o.dev_path = test;
    o.out_dir = out;
    /* The demo's figures are for the CPU; a GPU would run the same recipe
     * in another precision, with other numbers. */
    o.device = DEVICE_CPU;
    o.max_seq_length = DEMO_T;
    o.doc_stride = DEMO_STRIDE;
    o.batch = DEMO_BATCH;
    o.max_steps = steps;
    o.lr = DEMO_LR;
    o.warmup = 0.05;
    o.dropout = 0;
    o.seed = seed;
    o.save_every = save_every;
    o.save_every_minutes = minutes;
    o.keep = 2;
    o.threads = threads;
    o.log_every = 100;
    rc = trainer_run(&o);
    if (rc) return rc;

    printf("\nevaluation on the held-out test split (%d questions about entities never seen in training):\n",
           st.test_questions);
    for (int k = 0; k < SYNTH_NBASELINES; k++) {
        char label[96], path[4096], name[96];
        snprintf(name, sizeof name, "baseline-%s.json", synth_baseline_names[k]);
        snprintf(label, sizeof label, "baseline: %s", synth_baseline_names[k]);
        rc = print_eval(label, test, path_join(path, sizeof path, data, name), 0);
        if (rc) return rc;
    }
    rc = print_eval("bertc model", test, pred, 0);
    if (rc) return rc;
    printf("time: %.0f s in all; try: bertc ask --model %s/final --context @FILE --question TEXT\n", clock_now_s() - t0, out);
    return print_eval(NULL, test, pred, 1);
}
