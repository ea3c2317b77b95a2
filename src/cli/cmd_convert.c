/* bertc convert SRC DST: a Google BERT checkpoint (TensorFlow, read without
 * TensorFlow by src/model/tf_bundle.c) into a Hugging Face model dir that
 * transformers and every bertc command load. */
#include "core/args.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/tf_bert.h"
#include "text/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cmd_convert_summary[] = "convert a Google BERT (TensorFlow) checkpoint into a Hugging Face model dir";

/* SRC is a Google dir, or a checkpoint prefix (DIR/model.ckpt-1000) whose
 * dir holds bert_config.json and vocab.txt. */
static int resolve_src(const char *src, char *prefix, char *config, char *vocab_out, char *dir, size_t cap)
{
    char p[PATH_MAX];
    if (path_is_dir(src)) {
        snprintf(dir, cap, "%s", src);
        if (path_exists(path_join(p, sizeof p, src, "model.safetensors")))
            return err_set(ERR_INPUT, "%s: already a Hugging Face model dir (model.safetensors); bertc reads it as it is",
                           src);
        int found, rc = tf_find_checkpoint(src, prefix, cap, &found);
        if (rc) return rc;
        if (!found)
            return err_set(ERR_INPUT, "%s: no TensorFlow checkpoint (no `checkpoint` file and no *.ckpt*.index)", src);
    } else {
        snprintf(p, sizeof p, "%s.index", src);
        if (!path_exists(p))
            return err_set(ERR_INPUT, "%s: neither a directory nor a checkpoint prefix (no %s)", src, p);
        snprintf(prefix, cap, "%s", src);
        snprintf(dir, cap, "%s", src);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, cap, ".");
    }
    if (!path_exists(path_join(config, cap, dir, "bert_config.json")) &&
        !path_exists(path_join(config, cap, dir, "config.json")))
        return err_set(ERR_INPUT, "%s: no bert_config.json (or config.json) beside the checkpoint", dir);
    if (!path_exists(path_join(vocab_out, cap, dir, "vocab.txt")))
        return err_set(ERR_INPUT, "%s/vocab.txt: no such file (a BERT model dir needs the WordPiece vocab.txt)", dir);
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    int cased = 0, uncased = 0, force = 0;
    int64_t seed = 42;
    const arg_spec specs[] = {
        {"cased", ARG_FLAG, &cased, NULL, "the model is cased: tokenizer_config.json says do_lower_case false", .min = 0},
        {"uncased", ARG_FLAG, &uncased, NULL, "the model is uncased (the default, unless the path names cased_L-)",
         .min = 0},
        {"seed", ARG_I64, &seed, "N", "seed for qa_outputs when the checkpoint has no cls/squad (pre-trained)", .min = 0,
         .max = 9007199254740991.0},
        {"force", ARG_FLAG, &force, NULL, "replace the model files of an existing DST", .min = 0},
        {0},
    };
    const char *usage = "bertc convert SRC DST [--cased|--uncased] [--seed N] [--force]\n\n"
                        "SRC: a Google BERT dir (bert_config.json, vocab.txt, bert_model.ckpt.index/.data-*; the\n"
                        "checkpoint named by its `checkpoint` file, or its single *.ckpt*.index) or a checkpoint\n"
                        "prefix (DIR/model.ckpt-1000). DST: the Hugging Face dir to write (config.json,\n"
                        "model.safetensors, vocab.txt, tokenizer_config.json).";
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse("convert", usage, specs, argc, argv, &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (npos != 2) {
        free(pos);
        return err_set(ERR_INPUT, "convert: takes SRC and DST (got %d argument%s); see bertc convert --help", npos,
                       npos == 1 ? "" : "s");
    }
    const char *src = pos[0], *dst = pos[1];
    free(pos);
    if (cased && uncased) return err_set(ERR_INPUT, "convert: --cased and --uncased contradict each other");
    char prefix[PATH_MAX], config[PATH_MAX], vocab_path[PATH_MAX], dir[PATH_MAX], p[PATH_MAX];
    if ((rc = resolve_src(src, prefix, config, vocab_path, dir, PATH_MAX))) return rc;
    if (path_exists(dst) && !path_is_dir(dst)) return err_set(ERR_INPUT, "%s: exists and is not a directory", dst);
    if (!force && (path_exists(path_join(p, sizeof p, dst, "model.safetensors")) ||
                   path_exists(path_join(p, sizeof p, dst, "config.json"))))
        return err_set(ERR_INPUT, "%s: already holds a model (config.json or model.safetensors); use --force to "
                       "replace it", dst);
    /* Google's own rule (tokenization.validate_case_matches_checkpoint):
     * the release dirs are named cased_L-... and uncased_L-.... */
    int lower = 1;
    if (cased) lower = 0;
    else if (!uncased) {
        const char *c = strstr(prefix, "cased_L-");
        if (c && (c == prefix || c[-1] != 'n')) lower = 0;
    }
    /* The vocab is checked as every later command will load it. */
    vocab *v = NULL;
    if ((rc = vocab_load(vocab_path, &v))) return rc;
    vocab_free(v);
    int created = !path_exists(dst), qa = 0;
    if ((rc = mkdir_p(dst))) return rc;
    rc = tf_bert_export(config, prefix, vocab_path, lower, dst, (uint64_t)seed, &qa);
    if (rc) {
        if (created) remove_tree(dst);
        else {
            static const char *const files[] = {"config.json", "model.safetensors", "vocab.txt",
                                                "tokenizer_config.json"};
            for (int i = 0; i < 4; i++) unlink(path_join(p, sizeof p, dst, files[i]));
        }
        return rc;
    }
    printf("%s -> %s: do_lower_case %s%s\n", prefix, dst, lower ? "true" : "false",
           qa ? "; no cls/squad in the checkpoint (pre-trained): qa_outputs initialised" : "");
    return 0;
}
