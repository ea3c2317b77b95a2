/* bertc run_squad: google-research/bert's run_squad.py command line, so
 * that a script written for it runs with `python run_squad.py` replaced by
 * `bertc run_squad`. The flags keep their names, meanings and defaults; the
 * work is bertc's own: the init checkpoint is read without TensorFlow and
 * written once as a Hugging Face dir (OUTPUT_DIR/init_model), training is
 * trainer_run (train/trainer.h) and prediction is `bertc predict`'s
 * (infer_run, infer/infer.h), writing OUTPUT_DIR/predictions.json and
 * nbest_predictions.json as run_squad.py does. README.md, "bertc
 * run_squad", has the table of flags. */
#include "cli/options.h"
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/config.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/params.h"
#include "model/tf_bert.h"
#include "text/tokenizer.h"
#include "infer/infer.h"
#include "train/trainer.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char cmd_run_squad_summary[] = "google-research/bert's run_squad.py flags (TF checkpoints read directly)";

typedef enum { F_STR, F_BOOL, F_INT, F_FLOAT } flag_type;

typedef struct {
    const char *name;
    flag_type type;
    void *ptr;
    const char *help;
    int tpu;  /* accepted and ignored */
    int seen;
} flag;

typedef struct {
    const char *vocab_file, *bert_config_file, *init_checkpoint, *train_file, *predict_file, *output_dir;
    int do_lower_case, do_train, do_predict, use_tpu, verbose_logging, version_2_with_negative;
    int train_batch_size, predict_batch_size, max_seq_length, doc_stride, max_query_length, n_best_size,
        max_answer_length, save_checkpoints_steps, iterations_per_loop, num_tpu_cores;
    double learning_rate, num_train_epochs, warmup_proportion, null_score_diff_threshold;
    const char *tpu_name, *tpu_zone, *gcp_project, *master;
    const char *predict_precision; /* bertc's own: fp32 (auto), bf16 or int8 answers on the CPU */
} squad_flags;

/* absl's booleans: true/false, t/f, 1/0, any case. */
static int parse_bool(const char *name, const char *v, int *out)
{
    static const char *const yes[] = {"true", "t", "1"}, *const no[] = {"false", "f", "0"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(v, yes[i])) return *out = 1, 0;
        if (!strcasecmp(v, no[i])) return *out = 0, 0;
    }
    return err_set(ERR_INPUT, "run_squad: --%s=%s: not a boolean (true or false)", name, v);
}

static int set_value(flag *f, const char *v)
{
    char what[96];
    snprintf(what, sizeof what, "run_squad --%s", f->name);
    int64_t i;
    switch (f->type) {
    case F_STR:
        *(const char **)f->ptr = v;
        return 0;
    case F_BOOL:
        return parse_bool(f->name, v, f->ptr);
    case F_INT: {
        int rc = parse_int64(v, INT32_MIN, INT32_MAX, what, &i);
        if (!rc) *(int *)f->ptr = (int)i;
        return rc;
    }
    case F_FLOAT:
        return parse_double(v, -1e300, 1e300, what, f->ptr);
    }
    return 0;
}

/* --flag=value, --flag value, -flag (one dash, as absl), --flag and
 * --noflag for booleans. */
static int parse_flags(flag *flags, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--helpfull")) return ARGS_HELP;
        if (a[0] != '-')
            return err_set(ERR_INPUT, "run_squad: unexpected argument '%.200s' (flags only, as run_squad.py)", a);
        const char *body = a + (a[1] == '-' ? 2 : 1);
        const char *eq = strchr(body, '=');
        size_t nlen = eq ? (size_t)(eq - body) : strlen(body);
        flag *f = NULL;
        int negated = 0;
        for (flag *g = flags; g->name && !f; g++) {
            if (strlen(g->name) == nlen && !strncmp(body, g->name, nlen)) f = g;
            else if (g->type == F_BOOL && !eq && nlen == strlen(g->name) + 2 && !strncmp(body, "no", 2) &&
                     !strncmp(body + 2, g->name, nlen - 2))
                f = g, negated = 1;
        }
        if (!f)
            return err_set(ERR_INPUT, "run_squad: unknown flag --%.*s (bertc run_squad --help lists run_squad.py's flags)",
                           (int)(nlen > 100 ? 100 : nlen), body);
        f->seen = 1;
        int rc;
        if (f->type == F_BOOL && !eq) *(int *)f->ptr = !negated, rc = 0;
        else if (eq) rc = set_value(f, eq + 1);
        else if (i + 1 < argc) rc = set_value(f, argv[++i]);
        else rc = err_set(ERR_INPUT, "run_squad: --%s needs a value", f->name);
        if (rc) return rc;
    }
    return 0;
}

static void print_help(const flag *flags)
{
    printf("usage: bertc run_squad --vocab_file=FILE --bert_config_file=FILE --output_dir=DIR\n"
           "                       [--init_checkpoint=PREFIX] [--do_train --train_file=FILE]\n"
           "                       [--do_predict --predict_file=FILE] [flags]\n\n"
           "google-research/bert's run_squad.py flags, with their meanings and defaults. The init checkpoint\n"
           "(a TensorFlow checkpoint prefix, read without TensorFlow) is written to OUTPUT_DIR/init_model\n"
           "as a Hugging Face dir; training writes bertc's run dir into OUTPUT_DIR (checkpoints/, final/,\n"
           "metrics.csv); prediction writes OUTPUT_DIR/predictions.json and nbest_predictions.json.\n\nflags:\n");
    for (const flag *f = flags; f->name; f++) {
        char def[64] = "";
        switch (f->type) {
        case F_STR: snprintf(def, sizeof def, "%s", *(const char *const *)f->ptr ? *(const char *const *)f->ptr : "None"); break;
        case F_BOOL: snprintf(def, sizeof def, "%s", *(const int *)f->ptr ? "True" : "False"); break;
        case F_INT: snprintf(def, sizeof def, "%d", *(const int *)f->ptr); break;
        case F_FLOAT: snprintf(def, sizeof def, "%g", *(const double *)f->ptr); break;
        }
        printf("  --%-26s %s (default %s)%s\n", f->name, f->help, def, f->tpu ? " [accepted, ignored]" : "");
    }
}

/* The model run_squad.py would start from: the init checkpoint, or (as
 * run_squad.py does without one) a randomly initialised BERT. */
static int write_init_model(const squad_flags *s, const char *dst)
{
    int rc = mkdir_p(dst);
    if (rc) return rc;
    if (s->init_checkpoint) {
        char idx[PATH_MAX + 8], prefix[PATH_MAX];
        snprintf(prefix, sizeof prefix, "%s", s->init_checkpoint);
        snprintf(idx, sizeof idx, "%s.index", prefix);
        if (!path_exists(idx)) {
            /* A dir: the checkpoint its `checkpoint` file names (tf.train.latest_checkpoint). */
            int found = 0;
            if (path_is_dir(prefix) && !(rc = tf_find_checkpoint(s->init_checkpoint, prefix, sizeof prefix, &found)) &&
                found) {
            } else {
                return rc ? rc
                          : err_set(ERR_INPUT, "--init_checkpoint %s: no %s (give the checkpoint prefix, e.g. "
                                    "DIR/bert_model.ckpt)", s->init_checkpoint, idx);
            }
        }
        int qa = 0;
        rc = tf_bert_export(s->bert_config_file, prefix, s->vocab_file, NULL, s->do_lower_case, dst, 42, &qa);
        if (!rc) printf("run_squad: %s -> %s%s\n", prefix, dst, qa ? " (no cls/squad: qa_outputs initialised)" : "");
        return rc;
    }
    bert_config cfg;
    if ((rc = config_load(s->bert_config_file, &cfg))) return rc;
    param_table t;
    param_table_init(&t, &cfg);
    float *block = malloc(t.total * sizeof *block);
    if (!block) rc = err_set(ERR_RUNTIME, "run_squad: out of memory for %zu parameters", t.total);
    else {
        model_init_random(&cfg, &t, block, 42);
        rc = model_save(dst, &cfg, &t, block, NULL);
    }
    free(block);
    param_table_free(&t);
    char *vtext, p[PATH_MAX], tc[160];
    size_t vlen;
    if (!rc && !(rc = file_read_all(s->vocab_file, &vtext, &vlen))) {
        rc = file_write_atomic(path_join(p, sizeof p, dst, "vocab.txt"), vtext, vlen);
        free(vtext);
    }
    if (!rc) {
        int n = snprintf(tc, sizeof tc, "{\n  \"do_lower_case\": %s,\n  \"tokenizer_class\": \"BertTokenizer\"\n}\n",
                         s->do_lower_case ? "true" : "false");
        rc = file_write_atomic(path_join(p, sizeof p, dst, "tokenizer_config.json"), tc, (size_t)n);
    }
    if (!rc) printf("run_squad: no --init_checkpoint: %s initialised at random (as run_squad.py does)\n", dst);
    return rc;
}

/* run_squad.py's own checks of its flags (validate_flags_or_throw), then
 * bertc's; notes on flags that have no effect. */
static int check_flags(const squad_flags *s, const flag *flags)
{
    if (!s->do_train && !s->do_predict)
        return err_set(ERR_INPUT, "run_squad: at least one of --do_train or --do_predict must be True");
    static const char *const required[] = {"bert_config_file", "vocab_file", "output_dir"};
    for (int i = 0; i < 3; i++)
        for (const flag *f = flags; f->name; f++)
            if (!strcmp(f->name, required[i]) && !*(const char **)f->ptr)
                return err_set(ERR_INPUT, "run_squad: flag --%s must be specified", f->name);
    if (s->do_train && !s->train_file)
        return err_set(ERR_INPUT, "run_squad: if --do_train is True, then --train_file must be specified");
    if (s->do_predict && !s->predict_file)
        return err_set(ERR_INPUT, "run_squad: if --do_predict is True, then --predict_file must be specified");
    if (s->max_seq_length <= s->max_query_length + 3)
        return err_set(ERR_INPUT, "run_squad: the max_seq_length (%d) must be greater than max_query_length (%d) + 3",
                       s->max_seq_length, s->max_query_length);
    if (s->warmup_proportion < 0 || s->warmup_proportion >= 1)
        return err_set(ERR_INPUT, "run_squad: --warmup_proportion %g: bertc takes a proportion in [0, 1)",
                       s->warmup_proportion);
    if (s->train_batch_size < 1 || s->predict_batch_size < 1 || s->n_best_size < 1 || s->max_answer_length < 1 ||
        s->doc_stride < 1 || s->max_query_length < 1 || s->save_checkpoints_steps < 0 || s->num_train_epochs <= 0 ||
        s->learning_rate < 0)
        return err_set(ERR_INPUT, "run_squad: batch sizes, n_best_size, max_answer_length, doc_stride, "
                       "max_query_length and num_train_epochs must be positive, learning_rate and "
                       "save_checkpoints_steps not negative");
    char ignored[256] = "";
    for (const flag *f = flags; f->name; f++)
        if (f->tpu && f->seen) {
            size_t l = strlen(ignored);
            snprintf(ignored + l, sizeof ignored - l, "%s--%s", l ? ", " : "", f->name);
        }
    if (ignored[0]) printf("run_squad: ignoring %s (bertc runs on the CPU or a CUDA GPU)\n", ignored);
    int threshold_seen = 0;
    for (const flag *f = flags; f->name; f++)
        if (!strcmp(f->name, "null_score_diff_threshold")) threshold_seen = f->seen;
    if (threshold_seen && !s->version_2_with_negative)
        printf("run_squad: --null_score_diff_threshold has no effect without --version_2_with_negative\n");
    return 0;
}

/* The ranges `bertc predict` holds its options to, in its words, which
 * run_squad's values met when it ran predict's command line. */
static int check_predict_ranges(const squad_flags *s)
{
    const struct {
        const char *name;
        int v, lo, hi;
    } r[] = {
        {"max-seq-length", s->max_seq_length, 8, 8192},  {"doc-stride", s->doc_stride, 0, 8191},
        {"max-query-length", s->max_query_length, 0, 8192}, {"batch", s->predict_batch_size, 1, 65536},
        {"n-best", s->n_best_size, 1, 1000},             {"max-answer-length", s->max_answer_length, 1, 8192},
    };
    char what[64], v[32];
    int64_t i;
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) {
        snprintf(what, sizeof what, "predict --%s", r[k].name);
        snprintf(v, sizeof v, "%d", r[k].v);
        int rc = parse_int64(v, r[k].lo, r[k].hi, what, &i);
        if (rc) return rc;
    }
    double d;
    snprintf(v, sizeof v, "%.17g", s->null_score_diff_threshold);
    return s->version_2_with_negative ? parse_double(v, -1e9, 1e9, "predict --null-score-diff-threshold", &d) : 0;
}

/* Prediction as `bertc predict` makes it from the same options, into
 * OUTPUT_DIR/predictions.json and nbest_predictions.json (and, for SQuAD
 * 2.0 as run_squad.py, null_odds.json beside them). */
static int run_predict(const squad_flags *s, const char *model)
{
    char pred[PATH_MAX], nbest[PATH_MAX], odds[PATH_MAX];
    path_join(pred, sizeof pred, s->output_dir, "predictions.json");
    path_join(nbest, sizeof nbest, s->output_dir, "nbest_predictions.json");
    path_join(odds, sizeof odds, s->output_dir, "null_odds.json");
    int v2 = s->version_2_with_negative, rc = check_predict_ranges(s);
    if (rc) return rc;
    if (path_is_dir(pred)) return err_set(ERR_INPUT, "--out %s: is a directory (give the predictions file's path)", pred);
    if (v2 && path_is_dir(odds)) return err_set(ERR_INPUT, "--null-odds %s: is a directory (give the file's path)", odds);
    backend_opts bo;
    cli_device dev = CLI_DEVICE_DEFAULT;
    dev.precision = s->predict_precision;
    if ((rc = cli_answer_backend_opts("run_squad --predict_precision", &dev, 0, &bo))) return rc;
    infer_params ip = {.model_dir = model, .bo = &bo, .T = s->max_seq_length, .T_given = 1, .stride = s->doc_stride,
                       .stride_given = 1, .max_query_length = s->max_query_length, .batch = s->predict_batch_size,
                       .data_path = s->predict_file,
                       .post = {.n_best = s->n_best_size, .max_answer_length = s->max_answer_length,
                                .version_2_with_negative = v2,
                                .null_score_diff_threshold = v2 ? s->null_score_diff_threshold : 0.0},
                       .pred_path = pred, .nbest_path = nbest, .null_odds_path = v2 ? odds : NULL, .name = "predict"};
    infer_result r;
    rc = infer_run(&ip, &r);
    infer_result_free(&r);
    if (rc) return rc;
    if (v2) printf("run_squad: wrote %s, %s and %s\n", pred, nbest, odds);
    else printf("run_squad: wrote %s and %s\n", pred, nbest);
    return 0;
}

int cmd_run_squad(int argc, char **argv)
{
    squad_flags s = {
        .do_lower_case = 1, .train_batch_size = 32, .predict_batch_size = 8, .max_seq_length = 384,
        .doc_stride = 128, .max_query_length = 64, .n_best_size = 20, .max_answer_length = 30,
        .save_checkpoints_steps = 1000, .iterations_per_loop = 1000, .num_tpu_cores = 8, .learning_rate = 5e-5,
        .num_train_epochs = 3.0, .warmup_proportion = 0.1, .null_score_diff_threshold = 0.0,
        .predict_precision = "auto",
    };
    flag flags[] = {
        {"bert_config_file", F_STR, &s.bert_config_file, "bert_config.json of the model (required)", 0, 0},
        {"vocab_file", F_STR, &s.vocab_file, "vocab.txt of the model (required)", 0, 0},
        {"output_dir", F_STR, &s.output_dir, "where init_model/, the run and the predictions go (required)", 0, 0},
        {"train_file", F_STR, &s.train_file, "SQuAD json for training", 0, 0},
        {"predict_file", F_STR, &s.predict_file, "SQuAD json for predictions", 0, 0},
        {"init_checkpoint", F_STR, &s.init_checkpoint, "TF checkpoint prefix (or a dir with a `checkpoint` file)", 0, 0},
        {"do_lower_case", F_BOOL, &s.do_lower_case, "lower-case the text (uncased models)", 0, 0},
        {"max_seq_length", F_INT, &s.max_seq_length, "tokens per window", 0, 0},
        {"doc_stride", F_INT, &s.doc_stride, "stride between context windows, in tokens", 0, 0},
        {"max_query_length", F_INT, &s.max_query_length, "questions truncated to this many tokens", 0, 0},
        {"do_train", F_BOOL, &s.do_train, "train", 0, 0},
        {"do_predict", F_BOOL, &s.do_predict, "predict on --predict_file", 0, 0},
        {"train_batch_size", F_INT, &s.train_batch_size, "windows per optimizer step", 0, 0},
        {"predict_batch_size", F_INT, &s.predict_batch_size, "windows per forward pass in prediction", 0, 0},
        {"learning_rate", F_FLOAT, &s.learning_rate, "peak learning rate (Adam, weight decay 0.01, eps 1e-6)", 0, 0},
        {"num_train_epochs", F_FLOAT, &s.num_train_epochs, "epochs", 0, 0},
        {"warmup_proportion", F_FLOAT, &s.warmup_proportion, "fraction of the steps with linear warm-up", 0, 0},
        {"save_checkpoints_steps", F_INT, &s.save_checkpoints_steps, "steps between checkpoints", 0, 0},
        {"iterations_per_loop", F_INT, &s.iterations_per_loop, "TPU estimator loop", 1, 0},
        {"n_best_size", F_INT, &s.n_best_size, "candidates in nbest_predictions.json", 0, 0},
        {"max_answer_length", F_INT, &s.max_answer_length, "longest answer, in tokens", 0, 0},
        {"use_tpu", F_BOOL, &s.use_tpu, "TPU", 1, 0},
        {"tpu_name", F_STR, &s.tpu_name, "TPU", 1, 0},
        {"tpu_zone", F_STR, &s.tpu_zone, "TPU", 1, 0},
        {"gcp_project", F_STR, &s.gcp_project, "TPU", 1, 0},
        {"master", F_STR, &s.master, "TPU", 1, 0},
        {"num_tpu_cores", F_INT, &s.num_tpu_cores, "TPU", 1, 0},
        {"verbose_logging", F_BOOL, &s.verbose_logging, "data-processing warnings", 1, 0},
        {"version_2_with_negative", F_BOOL, &s.version_2_with_negative, "SQuAD 2.0 (questions without an answer)", 0, 0},
        {"null_score_diff_threshold", F_FLOAT, &s.null_score_diff_threshold, "SQuAD 2.0: predict null above this", 0, 0},
        {"predict_precision", F_STR, &s.predict_precision,
         "bertc's own: auto|fp32|bf16|int8, the precision of the predictions' linear layers on the CPU (bf16 needs "
         "AVX512-BF16, int8 AVX2)", 0, 0},
        {0, 0, 0, 0, 0, 0},
    };
    int rc = parse_flags(flags, argc, argv);
    if (rc == ARGS_HELP) {
        print_help(flags);
        return 0;
    }
    if (rc) return rc;
    /* A precision this CPU cannot answer in is refused before training. */
    precision_kind pp;
    if ((rc = cli_parse_answer_precision("run_squad --predict_precision", s.predict_precision, &pp))) return rc;
    if ((rc = check_flags(&s, flags))) return rc;
    int on_cpu = pp == PREC_INT8 || (pp == PREC_BF16 && !select_probe_cuda(0, NULL, 0, NULL, NULL, NULL, NULL, 0));
    if (s.do_predict && on_cpu && (rc = backend_answer_check(pp, NULL, 0))) return rc;
    /* The vocab and config are checked before anything is written. */
    vocab *v = NULL;
    if ((rc = vocab_load(s.vocab_file, &v))) return err_wrap(rc, "--vocab_file");
    vocab_free(v);
    bert_config cfg;
    if ((rc = config_load(s.bert_config_file, &cfg))) return rc;
    if (s.max_seq_length > cfg.max_position_embeddings)
        return err_set(ERR_INPUT, "run_squad: cannot use sequence length %d because the BERT model was only trained up "
                       "to sequence length %d (%s)", s.max_seq_length, cfg.max_position_embeddings, s.bert_config_file);
    if (s.doc_stride >= s.max_seq_length)
        return err_set(ERR_INPUT, "run_squad: --doc_stride %d must be below --max_seq_length %d", s.doc_stride,
                       s.max_seq_length);
    int out_created = !path_exists(s.output_dir);
    if ((rc = mkdir_p(s.output_dir))) return rc;
    char init_dir[PATH_MAX], final_dir[PATH_MAX];
    path_join(init_dir, sizeof init_dir, s.output_dir, "init_model");
    int init_created = !path_exists(init_dir);
    if ((rc = write_init_model(&s, init_dir))) {
        /* Nothing half-written: what this run created goes. */
        if (out_created) remove_tree(s.output_dir);
        else if (init_created) remove_tree(init_dir);
        return rc;
    }
    const char *model = init_dir;
    if (s.do_train) {
        trainer_opts o;
        trainer_opts_default(&o);
        o.model_dir = init_dir;
        o.train_path = s.train_file;
        o.out_dir = s.output_dir;
        o.max_seq_length = s.max_seq_length;
        o.doc_stride = s.doc_stride;
        o.max_query_length = s.max_query_length;
        o.epochs = s.num_train_epochs;
        o.batch = s.train_batch_size;
        o.lr = s.learning_rate;
        o.warmup = s.warmup_proportion;
        /* optimization.py: AdamWeightDecayOptimizer(weight_decay_rate=0.01,
         * epsilon=1e-6, no decay on LayerNorm and biases), clip_by_global_norm 1.0. */
        o.weight_decay = 0.01;
        o.adam_eps = 1e-6;
        o.clip = 1.0;
        o.save_every = s.save_checkpoints_steps;
        o.save_every_minutes = 0;
        o.keep = 5; /* tf.estimator's keep_checkpoint_max */
        o.n_best = s.n_best_size;
        o.max_answer_length = s.max_answer_length;
        o.version_2_with_negative = s.version_2_with_negative;
        o.null_score_diff_threshold = s.null_score_diff_threshold;
        if ((rc = trainer_opts_check(&o)) || (rc = trainer_run(&o))) return rc;
        path_join(final_dir, sizeof final_dir, s.output_dir, "final");
        model = final_dir;
    }
    return s.do_predict ? run_predict(&s, model) : 0;
}
