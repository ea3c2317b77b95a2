/* config_load on arbitrary bytes: loads a valid config or fails with
 * ERR_INPUT; a loaded config passes config_validate, and config_save then
 * config_load gives it back exactly. The same bytes are also a model dir's
 * tokenizer_config.json, read by tokenizer_load_dir (the other JSON file of
 * a model dir). */
#include "fuzz.h"
#include "model/config.h"
#include "text/tokenizer.h"

static char model_dir[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    snprintf(model_dir, sizeof model_dir, "%s", fuzz_mkdir("model"));
    static const char vocab_txt[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n";
    fuzz_write("model/vocab.txt", vocab_txt, sizeof vocab_txt - 1);
    return 0;
}

static void tokenizer_config(const uint8_t *data, size_t size)
{
    fuzz_write("model/tokenizer_config.json", data, size);
    vocab *v;
    tokenizer *t;
    int rc = tokenizer_load_dir(model_dir, &v, &t);
    fuzz_check_rc(rc, "tokenizer_load_dir");
    if (rc == 0) {
        FUZZ_ASSERT(tokenizer_lower_case(t) == 0 || tokenizer_lower_case(t) == 1, "lower_case %d",
                    tokenizer_lower_case(t));
        tokenizer_free(t);
        vocab_free(v);
    } else {
        FUZZ_ASSERT(v == NULL && t == NULL, "tokenizer_load_dir failed but returned objects");
    }
}

static int same(const bert_config *a, const bert_config *b)
{
    return a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->num_hidden_layers == b->num_hidden_layers && a->num_attention_heads == b->num_attention_heads &&
           a->intermediate_size == b->intermediate_size && a->max_position_embeddings == b->max_position_embeddings &&
           a->type_vocab_size == b->type_vocab_size && a->layer_norm_eps == b->layer_norm_eps &&
           a->hidden_dropout_prob == b->hidden_dropout_prob &&
           a->attention_probs_dropout_prob == b->attention_probs_dropout_prob &&
           a->initializer_range == b->initializer_range && a->pad_token_id == b->pad_token_id;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = fuzz_write("config.json", data, size);
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    tokenizer_config(data, size);
    bert_config c;
    int rc = config_load(path, &c);
    fuzz_check_rc(rc, "config_load");
    if (rc) return 0;
    rc = config_validate(&c, path);
    FUZZ_ASSERT(rc == 0, "config_load accepted a config that config_validate rejects: %s", err_msg());
    char out[512];
    snprintf(out, sizeof out, "%s", fuzz_path("saved.json"));
    rc = config_save(out, &c);
    FUZZ_ASSERT(rc == 0, "config_save: %s", err_msg());
    bert_config back;
    rc = config_load(out, &back);
    FUZZ_ASSERT(rc == 0, "config_load of what config_save wrote: %s", err_msg());
    FUZZ_ASSERT(same(&c, &back), "config_save + config_load changed a value");
    return 0;
}
