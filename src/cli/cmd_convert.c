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

int cmd_convert(int argc, char **argv)
{
    int cased = 0, uncased = 0, force = 0;
    int64_t seed = 42;
    const arg_spec specs[] = {
        {"cased", ARG_FLAG, &cased, NULL, "the model is cased: tokenizer_config.json says do_lower_case false", .min = 0},
        {"uncased", ARG_FLAG, &uncased, NULL, "the model is uncased (the default, unless SRC has a tokenizer_config.json)",
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
    if ((rc = tf_bert_resolve(src, prefix, config, vocab_path, dir, PATH_MAX))) return rc;
    if (path_exists(dst) && !path_is_dir(dst)) return err_set(ERR_INPUT, "%s: exists and is not a directory", dst);
    if (!force && (path_exists(path_join(p, sizeof p, dst, "model.safetensors")) ||
                   path_exists(path_join(p, sizeof p, dst, "config.json"))))
        return err_set(ERR_INPUT, "%s: already holds a model (config.json or model.safetensors); use --force to "
                       "replace it", dst);
    /* As bertc reads the dir: its tokenizer_config.json, else uncased
     * (BertTokenizer's default); --cased / --uncased override. */
    int lower = cased ? 0 : uncased ? 1 : -1;
    /* The vocab is checked as every later command will load it. */
    vocab *v = NULL;
    if ((rc = vocab_load(vocab_path, &v))) return rc;
    vocab_free(v);
    int created = !path_exists(dst), qa = 0;
    if ((rc = mkdir_p(dst))) return rc;
    rc = tf_bert_export(config, prefix, vocab_path, dir, lower, dst, (uint64_t)seed, &qa);
    if (rc) {
        if (created) remove_tree(dst);
        else {
            static const char *const files[] = {"config.json", "model.safetensors", "vocab.txt",
                                                "tokenizer_config.json"};
            for (int i = 0; i < 4; i++) unlink(path_join(p, sizeof p, dst, files[i]));
        }
        return rc;
    }
    printf("%s -> %s%s\n", prefix, dst,
           qa ? "; no cls/squad in the checkpoint (pre-trained): qa_outputs initialised" : "");
    return 0;
}
