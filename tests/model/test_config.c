/* config.json: good files, BertConfig defaults, every error case (ERR_INPUT
 * with the file and the field in the message), save/load round trip, and
 * the named configs. */
#include "core/err.h"
#include "core/fileio.h"
#include "model/config.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loads `text` as a config.json and expects ERR_INPUT with the file's path,
 * want1 and want2 (when not NULL) in the message. */
static void expect_error(const char *name, const char *text, const char *want1, const char *want2)
{
    const char *path = tu_write_tmp(name, text);
    bert_config c;
    err_clear();
    tu_expect_input_error(name, config_load(path, &c), path, want1, want2, NULL);
}

/* Writes text to the temporary file name and loads it, checking that it
 * loads (what names it in the message). */
static bert_config load_text(const char *name, const char *text, const char *what)
{
    bert_config c;
    int rc = config_load(tu_write_tmp(name, text), &c);
    CHECK(rc == 0, "%s config: rc %d: %s", what, rc, err_msg());
    return c;
}

static void test_minilm_config(void)
{
    /* The config.json of sentence-transformers/all-MiniLM-L6-v2, as shipped. */
    bert_config c = load_text("minilm.json",
        "{\n  \"_name_or_path\": \"nreimers/MiniLM-L6-H384-uncased\",\n  \"architectures\": [\"BertModel\"],\n"
        "  \"attention_probs_dropout_prob\": 0.1,\n  \"gradient_checkpointing\": false,\n"
        "  \"hidden_act\": \"gelu\",\n  \"hidden_dropout_prob\": 0.1,\n  \"hidden_size\": 384,\n"
        "  \"initializer_range\": 0.02,\n  \"intermediate_size\": 1536,\n  \"layer_norm_eps\": 1e-12,\n"
        "  \"max_position_embeddings\": 512,\n  \"model_type\": \"bert\",\n  \"num_attention_heads\": 12,\n"
        "  \"num_hidden_layers\": 6,\n  \"pad_token_id\": 0,\n  \"position_embedding_type\": \"absolute\",\n"
        "  \"transformers_version\": \"4.8.2\",\n  \"type_vocab_size\": 2,\n  \"use_cache\": true,\n"
        "  \"vocab_size\": 30522\n}\n", "minilm");
    printf("minilm: V%d H%d L%d A%d I%d P%d TV%d eps %g drop %g/%g init %g pad %d\n", c.vocab_size, c.hidden_size,
           c.num_hidden_layers, c.num_attention_heads, c.intermediate_size, c.max_position_embeddings,
           c.type_vocab_size, c.layer_norm_eps, c.hidden_dropout_prob, c.attention_probs_dropout_prob,
           c.initializer_range, c.pad_token_id);
    CHECK(c.vocab_size == 30522 && c.hidden_size == 384 && c.num_hidden_layers == 6 && c.num_attention_heads == 12 &&
              c.intermediate_size == 1536 && c.max_position_embeddings == 512 && c.type_vocab_size == 2,
          "minilm sizes");
    CHECK(c.layer_norm_eps == 1e-12f && c.hidden_dropout_prob == 0.1f && c.attention_probs_dropout_prob == 0.1f &&
              c.initializer_range == 0.02f && c.pad_token_id == 0,
          "minilm floats");
}

static void test_defaults(void)
{
    /* Only the sizes: everything else takes BertConfig's defaults. */
    bert_config c = load_text("sparse.json",
                              "{\"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                              " \"num_attention_heads\": 4, \"intermediate_size\": 32,"
                              " \"some_future_field\": {\"x\": [1, 2]}, \"hidden_act\": null}",
                              "sparse");
    CHECK(c.layer_norm_eps == 1e-12f, "default layer_norm_eps %g", c.layer_norm_eps);
    CHECK(c.hidden_dropout_prob == 0.1f && c.attention_probs_dropout_prob == 0.1f, "default dropouts");
    CHECK(c.initializer_range == 0.02f, "default initializer_range %g", c.initializer_range);
    CHECK(c.type_vocab_size == 2 && c.max_position_embeddings == 512 && c.pad_token_id == 0, "default sizes");
    CHECK(c.vocab_size == 100 && c.hidden_size == 64 && c.intermediate_size == 32, "given sizes");

    const char *path = tu_write_tmp("padnull.json", "{\"vocab_size\": 100, \"pad_token_id\": null, \"layer_norm_eps\": 1e-5,"
                                                    " \"hidden_dropout_prob\": 0, \"initializer_range\": 1}");
    int rc = config_load(path, &c);
    CHECK(rc == 0 && c.pad_token_id == -1, "pad_token_id null -> -1 (rc %d, pad %d)", rc, c.pad_token_id);
    CHECK(c.layer_norm_eps == 1e-5f && c.hidden_dropout_prob == 0 && c.initializer_range == 1, "numbers as given");
}

static void test_errors(void)
{
    expect_error("act.json", "{\"hidden_act\": \"relu\"}", "hidden_act", "\"relu\"");
    expect_error("act_new.json", "{\"hidden_act\": \"gelu_new\"}", "hidden_act", "gelu_new");
    expect_error("act_type.json", "{\"hidden_act\": 3}", "hidden_act", "expected a string");
    expect_error("posemb.json", "{\"position_embedding_type\": \"relative_key\"}", "position_embedding_type",
                 "relative_key");
    expect_error("model_type.json", "{\"model_type\": \"roberta\"}", "model_type", "roberta");
    expect_error("heads.json", "{\"hidden_size\": 100, \"num_attention_heads\": 12}", "num_attention_heads",
                 "does not divide");
    expect_error("hidden0.json", "{\"hidden_size\": 0}", "hidden_size", "out of range");
    expect_error("layers_neg.json", "{\"num_hidden_layers\": -1}", "num_hidden_layers", "out of range");
    expect_error("vocab0.json", "{\"vocab_size\": 0}", "vocab_size", "out of range");
    expect_error("inter0.json", "{\"intermediate_size\": 0}", "intermediate_size", "out of range");
    expect_error("maxpos0.json", "{\"max_position_embeddings\": 0}", "max_position_embeddings", "out of range");
    expect_error("tv0.json", "{\"type_vocab_size\": 0}", "type_vocab_size", "out of range");
    expect_error("huge.json", "{\"vocab_size\": 4000000000}", "vocab_size", "out of range");
    expect_error("bigint.json", "{\"vocab_size\": 99999999999999999999999}", "malformed JSON", "too big");
    expect_error("str_size.json", "{\"hidden_size\": \"768\"}", "hidden_size", "expected an integer, got a string");
    expect_error("real_size.json", "{\"hidden_size\": 768.0}", "hidden_size", "expected an integer, got a real");
    expect_error("eps_str.json", "{\"layer_norm_eps\": \"1e-12\"}", "layer_norm_eps", "expected a number");
    expect_error("eps0.json", "{\"layer_norm_eps\": 0}", "layer_norm_eps", "positive");
    expect_error("drop1.json", "{\"hidden_dropout_prob\": 1.0}", "hidden_dropout_prob", "[0, 1)");
    expect_error("dropneg.json", "{\"attention_probs_dropout_prob\": -0.1}", "attention_probs_dropout_prob", "[0, 1)");
    expect_error("initneg.json", "{\"initializer_range\": -0.02}", "initializer_range", "non-negative");
    expect_error("pad_big.json", "{\"vocab_size\": 10, \"pad_token_id\": 10}", "pad_token_id", "not a token id");
    expect_error("pad_str.json", "{\"pad_token_id\": \"0\"}", "pad_token_id", "expected an integer");
    expect_error("array.json", "[1, 2, 3]", "top", "an array");
    expect_error("dup.json", "{\"hidden_size\": 64, \"hidden_size\": 128}", "duplicate", "hidden_size");
    /* Malformed JSON: the message carries file:line:column. */
    const char *path = tu_write_tmp("broken.json", "{\n  \"hidden_size\": 768,\n  \"vocab_size\": 30522,,\n}\n");
    char want[600];
    snprintf(want, sizeof want, "%s:3:", path);
    expect_error("broken.json", "{\n  \"hidden_size\": 768,\n  \"vocab_size\": 30522,,\n}\n", want, "malformed JSON");
    expect_error("empty.json", "", "malformed JSON", NULL);
    expect_error("nul.json", "{\"a\": 1}\n\x01", "malformed JSON", NULL);

    bert_config c;
    err_clear();
    int rc = config_load("/nonexistent/config.json", &c);
    printf("%-28s rc=%d  %s\n", "missing file", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "/nonexistent/config.json"), "missing file: rc %d", rc);
}

static void test_named(void)
{
    static const struct { const char *name; int L, H, A, I; } want[] = {
        {"tiny", 2, 128, 2, 512},     {"mini", 4, 256, 4, 1024},   {"small", 4, 512, 8, 2048},
        {"minilm", 6, 384, 12, 1536}, {"base", 12, 768, 12, 3072}, {"large", 24, 1024, 16, 4096},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bert_config c;
        int rc = config_named(want[i].name, 21128, &c);
        printf("named %-7s rc=%d L%d H%d A%d I%d V%d P%d TV%d\n", want[i].name, rc, c.num_hidden_layers,
               c.hidden_size, c.num_attention_heads, c.intermediate_size, c.vocab_size, c.max_position_embeddings,
               c.type_vocab_size);
        CHECK(rc == 0 && config_is_named(want[i].name), "%s: rc %d", want[i].name, rc);
        CHECK(c.num_hidden_layers == want[i].L && c.hidden_size == want[i].H && c.num_attention_heads == want[i].A &&
                  c.intermediate_size == want[i].I,
              "%s sizes", want[i].name);
        CHECK(c.vocab_size == 21128 && c.max_position_embeddings == 512 && c.type_vocab_size == 2 &&
                  c.layer_norm_eps == 1e-12f && c.pad_token_id == 0,
              "%s fixed fields", want[i].name);
    }
    bert_config c;
    err_clear();
    int rc = config_named("huge", 30522, &c);
    printf("named huge: rc=%d %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "huge") && strstr(err_msg(), "tiny"), "unknown name: rc %d", rc);
    CHECK(!config_is_named("TINY") && !config_is_named(""), "names are exact");
    rc = config_named("tiny", 0, &c);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "vocab_size"), "named with vocab 0: rc %d %s", rc, err_msg());
}

static void test_round_trip(void)
{
    bert_config a, b;
    config_named("minilm", 30522, &a);
    a.layer_norm_eps = 1e-7f;
    a.hidden_dropout_prob = 0.15f;
    a.attention_probs_dropout_prob = 0.0f;
    a.initializer_range = 0.037f;
    a.max_position_embeddings = 384;
    a.type_vocab_size = 3;
    a.pad_token_id = 5;
    char path[512];
    snprintf(path, sizeof path, "%s/saved_config.json", tu_tmpdir());
    int rc = config_save(path, &a);
    CHECK(rc == 0, "config_save: %s", err_msg());
    rc = config_load(path, &b);
    CHECK(rc == 0, "reload: %s", err_msg());
    CHECK(!memcmp(&a, &b, sizeof a), "config_save/config_load round trip differs");
    char *text;
    size_t len;
    file_read_all(path, &text, &len);
    printf("saved config.json:\n%s", text);
    CHECK(strstr(text, "\"architectures\": [\n    \"BertForQuestionAnswering\"\n  ]") != NULL, "architectures");
    CHECK(strstr(text, "\"model_type\": \"bert\"") && strstr(text, "\"hidden_act\": \"gelu\""), "model_type/act");
    CHECK(strstr(text, "\"layer_norm_eps\": 1e-07,") && strstr(text, "\"hidden_dropout_prob\": 0.15,") &&
              strstr(text, "\"initializer_range\": 0.037,"),
          "floats are written in their shortest form");
    free(text);

    a.pad_token_id = -1;
    rc = config_save(path, &a) || config_load(path, &b);
    CHECK(rc == 0 && b.pad_token_id == -1, "pad_token_id -1 written as null and read back");
    a.num_attention_heads = 5;
    err_clear();
    rc = config_save(path, &a);
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "num_attention_heads"), "config_save refuses an invalid config");
}

/* bert_flops: the closed form 6 (L (4C^2 + 2CI) + 2C) B T + 12 L B T^2 C on
 * BERT-base at T 384 (a hand-computed figure), linear in B, and the layer
 * and head terms adding up to it. */
static void test_flops(void)
{
    bert_config c;
    config_named("base", 30522, &c);
    double want = 6.0 * (12.0 * (4.0 * 768 * 768 + 2.0 * 768 * 3072) + 2.0 * 768) * 384 +
                  12.0 * 12 * 384.0 * 384 * 768; /* 2.12000440320e11 */
    double got = bert_flops(&c, 1, 384);
    CHECK(fabs(got - want) <= 1e-12 * want && want == 212000440320.0,
          "bert_flops base T 384 B 1: %.6g, want %.6g", got, want);
    CHECK(fabs(bert_flops(&c, 32, 384) - 32 * got) <= 1e-12 * 32 * got, "bert_flops is linear in B: %.6g",
          bert_flops(&c, 32, 384));
    double parts = 12 * bert_layer_flops(&c, 384) + bert_qa_head_flops(&c, 384);
    CHECK(fabs(parts - got) <= 1e-12 * got, "12 layers + the head = bert_flops: %.6g vs %.6g", parts, got);
}

int main(void)
{
    log_quiet(1);
    test_minilm_config();
    test_defaults();
    test_errors();
    test_named();
    test_round_trip();
    test_flops();
    return tu_done();
}
