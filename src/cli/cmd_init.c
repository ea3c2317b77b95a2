/* bertc init: a randomly initialised model dir (config.json,
 * model.safetensors, vocab.txt, tokenizer_config.json) that bertc and
 * transformers both load: for tests, benchmarks and training from scratch. */
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/config.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/params.h"
#include "text/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cmd_init_summary[] = "write a randomly initialised model dir (named config or config.json)";

/* --config is a named config, a config.json, or a model dir holding one. */
static int resolve_config(const char *arg, int n_vocab, bert_config *cfg)
{
    if (config_is_named(arg)) return config_named(arg, n_vocab, cfg);
    char p[PATH_MAX];
    const char *file = arg;
    if (path_is_dir(arg)) file = path_join(p, sizeof p, arg, "config.json");
    if (!path_exists(file))
        return err_set(ERR_INPUT, "--config %s: not a named config (tiny, mini, small, minilm, base, large), "
                       "and no such file", arg);
    int rc = config_load(file, cfg);
    if (rc) return rc;
    if (cfg->vocab_size != n_vocab)
        log_info("init: vocab_size %d from the vocab, not %d from %s", n_vocab, cfg->vocab_size, file);
    cfg->vocab_size = n_vocab;
    return config_validate(cfg, file);
}

/* Refuses to overwrite a model unless --force: init is cheap, a trained
 * model is not. */
static int check_out(const char *out, int force)
{
    if (path_exists(out) && !path_is_dir(out))
        return err_set(ERR_INPUT, "--out %s: exists and is not a directory", out);
    /* The nearest existing ancestor must be a directory for mkdir to work. */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", out);
    for (char *slash; !path_exists(p) && (slash = strrchr(p, '/')) != NULL && slash != p;) *slash = 0;
    if (path_exists(p) && !path_is_dir(p))
        return err_set(ERR_INPUT, "--out %s: %s is not a directory", out, p);
    if (!force && (path_exists(path_join(p, sizeof p, out, "model.safetensors")) ||
                   path_exists(path_join(p, sizeof p, out, "config.json"))))
        return err_set(ERR_INPUT, "--out %s: already holds a model (config.json or model.safetensors); "
                       "use --force to replace it", out);
    return 0;
}

static int write_tokenizer_files(const char *out, const char *vtext, size_t vlen, int lower, int max_len)
{
    char p[PATH_MAX], tc[256];
    int rc = file_write_atomic(path_join(p, sizeof p, out, "vocab.txt"), vtext, vlen);
    if (rc) return rc;
    int n = snprintf(tc, sizeof tc,
                     "{\n  \"do_lower_case\": %s,\n  \"model_max_length\": %d,\n"
                     "  \"tokenizer_class\": \"BertTokenizer\"\n}\n",
                     lower ? "true" : "false", max_len);
    return file_write_atomic(path_join(p, sizeof p, out, "tokenizer_config.json"), tc, (size_t)n);
}

int cmd_init(int argc, char **argv)
{
    const char *config = NULL, *vocab_path = NULL, *out = NULL;
    int64_t seed = 42;
    int cased = 0, force = 0;
    const arg_spec specs[] = {
        {"config", ARG_STR, &config, "NAME|FILE",
         "tiny, mini, small, minilm, base, large, or a config.json (or a model dir holding one)", .required = 1},
        {"vocab", ARG_STR, &vocab_path, "FILE", "WordPiece vocab.txt (sets vocab_size; copied to DIR)", .required = 1},
        {"out", ARG_STR, &out, "DIR", "model dir to write (created; must not hold a model)", .required = 1},
        {"seed", ARG_I64, &seed, "N", "initialisation seed", .min = 0, .max = 9007199254740991.0},
        {"cased", ARG_FLAG, &cased, NULL, "the vocab is cased: tokenizer_config.json says do_lower_case false", .min = 0},
        {"force", ARG_FLAG, &force, NULL, "replace the model files of an existing model dir", .min = 0},
        {0},
    };
    int rc = args_parse("init", "bertc init --config NAME|FILE --vocab FILE --out DIR [--seed N] [--cased] [--force]",
                        specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;

    /* Checked as every later command will load it (duplicates, UTF-8, special
     * tokens), so a model dir is never written around a vocab nothing can read. */
    vocab *v = NULL;
    if ((rc = vocab_load(vocab_path, &v))) return err_wrap(rc, "--vocab");
    int vsize = vocab_size(v);
    vocab_free(v);
    char *vtext = NULL;
    size_t vlen = 0;
    if ((rc = file_read_all(vocab_path, &vtext, &vlen))) return err_wrap(rc, "--vocab");
    bert_config cfg;
    param_table t = {0};
    float *block = NULL;
    int created = 0;
    if ((rc = resolve_config(config, vsize, &cfg)) || (rc = check_out(out, force))) goto done;
    created = !path_exists(out);
    if ((rc = mkdir_p(out))) goto done;
    param_table_init(&t, &cfg);
    block = malloc(t.total * sizeof *block);
    if (!block) {
        rc = err_set(ERR_RUNTIME, "init: out of memory for %zu parameters", t.total);
        goto done;
    }
    model_init_random(&cfg, &t, block, (uint64_t)seed);
    if ((rc = model_save(out, &cfg, &t, block, NULL)) ||
        (rc = write_tokenizer_files(out, vtext, vlen, !cased, cfg.max_position_embeddings)))
        goto done;
    printf("%s: L%d H%d A%d I%d, vocab %d, %zu parameters, seed %lld\n", out, cfg.num_hidden_layers,
           cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size, cfg.vocab_size, t.total,
           (long long)seed);
done:
    /* No half-written model dir: remove what this run created. */
    if (rc && created && path_is_dir(out)) remove_tree(out);
    else if (rc && !created && block) {
        static const char *const files[] = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"};
        char p[PATH_MAX];
        for (int i = 0; i < 4; i++) unlink(path_join(p, sizeof p, out, files[i]));
    }
    free(block);
    free(vtext);
    param_table_free(&t);
    return rc;
}
