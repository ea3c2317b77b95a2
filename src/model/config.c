/* config.json: reading, validation, writing, and the named configs.
 *
 * The reader follows transformers' BertConfig: a field that is absent keeps
 * BertConfig's default, a field bertc does not know is ignored, and what
 * bertc cannot compute the same way (another activation, relative position
 * embeddings, another model type) is refused rather than silently changed. */
#include "model/config.h"
#include "core/err.h"
#include "core/fileio.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds keep every size product far from overflow; they are well
 * above any released BERT. */
#define MAX_VOCAB (1 << 24)
#define MAX_HIDDEN 65536
#define MAX_LAYERS 1024
#define MAX_INTERMEDIATE (1 << 20)
#define MAX_POSITIONS (1 << 20)
#define MAX_TYPE_VOCAB 65536

void config_defaults(bert_config *cfg)
{
    /* bert-base-uncased's config.json */
    *cfg = (bert_config){.vocab_size = 30522, .hidden_size = 768, .num_hidden_layers = 12, .num_attention_heads = 12,
                         .intermediate_size = 3072, .max_position_embeddings = 512, .type_vocab_size = 2,
                         .layer_norm_eps = 1e-12f, .hidden_dropout_prob = 0.1f, .attention_probs_dropout_prob = 0.1f,
                         .initializer_range = 0.02f, .pad_token_id = 0};
}

/* A JSON value's type, as the messages about config.json name it. */
static const char *const type_names[] = {
    [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array", [JSON_STRING] = "a string", [JSON_INTEGER] = "an integer",
    [JSON_REAL] = "a real number", [JSON_TRUE] = "a boolean", [JSON_FALSE] = "a boolean", [JSON_NULL] = "null"};
static const char *json_type_name(const json_t *v) { return type_names[json_typeof(v)]; }

/* Integer field in [min, max]; absent keeps *out. */
static int get_int(const json_t *root, const char *path, const char *key, int min, int max, int *out)
{
    const json_t *v = json_object_get(root, key);
    if (!v) return 0;
    if (!json_is_integer(v))
        return err_set(ERR_INPUT, "%s: field %s: expected an integer, got %s", path, key, json_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return err_set(ERR_INPUT, "%s: field %s: %lld is out of range [%d, %d]", path, key, (long long)x, min, max);
    *out = (int)x;
    return 0;
}

/* Number field (integer or real); the range is checked by config_validate. */
static int get_float(const json_t *root, const char *path, const char *key, float *out)
{
    const json_t *v = json_object_get(root, key);
    if (!v) return 0;
    if (!json_is_number(v))
        return err_set(ERR_INPUT, "%s: field %s: expected a number, got %s", path, key, json_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || fabs(x) > 1e30)
        return err_set(ERR_INPUT, "%s: field %s: %g is not a usable number", path, key, x);
    *out = (float)x;
    return 0;
}

/* A string field that bertc supports with exactly one value; null means
 * the default, as in BertConfig. */
static int check_string(const json_t *root, const char *path, const char *key, const char *want, const char *why)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v))
        return err_set(ERR_INPUT, "%s: field %s: expected a string, got %s", path, key, json_type_name(v));
    if (strcmp(json_string_value(v), want) != 0)
        return err_set(ERR_INPUT, "%s: field %s: \"%.100s\" is not supported (%s)", path, key, json_string_value(v),
                       why);
    return 0;
}

int config_load(const char *path, bert_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    int rc = file_read_all(path, &text, &len);
    if (rc) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) return err_set(ERR_INPUT, "%s:%d:%d: malformed JSON: %s", path, jerr.line, jerr.column, jerr.text);
    bert_config c;
    config_defaults(&c);
    if (!json_is_object(root)) {
        rc = err_set(ERR_INPUT, "%s: expected a JSON object at the top, got %s", path, json_type_name(root));
        goto done;
    }
    if ((rc = check_string(root, path, "model_type", "bert",
                           "bertc loads BERT models, model_type \"bert\"")) ||
        (rc = check_string(root, path, "hidden_act", "gelu",
                           "bertc implements \"gelu\", the exact erf GELU of BERT")) ||
        (rc = check_string(root, path, "position_embedding_type", "absolute",
                           "bertc implements \"absolute\" position embeddings only")))
        goto done;
    if ((rc = get_int(root, path, "vocab_size", 1, MAX_VOCAB, &c.vocab_size)) ||
        (rc = get_int(root, path, "hidden_size", 1, MAX_HIDDEN, &c.hidden_size)) ||
        (rc = get_int(root, path, "num_hidden_layers", 1, MAX_LAYERS, &c.num_hidden_layers)) ||
        (rc = get_int(root, path, "num_attention_heads", 1, MAX_HIDDEN, &c.num_attention_heads)) ||
        (rc = get_int(root, path, "intermediate_size", 1, MAX_INTERMEDIATE, &c.intermediate_size)) ||
        (rc = get_int(root, path, "max_position_embeddings", 1, MAX_POSITIONS, &c.max_position_embeddings)) ||
        (rc = get_int(root, path, "type_vocab_size", 1, MAX_TYPE_VOCAB, &c.type_vocab_size)) ||
        (rc = get_float(root, path, "layer_norm_eps", &c.layer_norm_eps)) ||
        (rc = get_float(root, path, "hidden_dropout_prob", &c.hidden_dropout_prob)) ||
        (rc = get_float(root, path, "attention_probs_dropout_prob", &c.attention_probs_dropout_prob)) ||
        (rc = get_float(root, path, "initializer_range", &c.initializer_range)))
        goto done;
    const json_t *pad = json_object_get(root, "pad_token_id");
    if (pad && json_is_null(pad)) c.pad_token_id = -1;
    else if ((rc = get_int(root, path, "pad_token_id", 0, MAX_VOCAB, &c.pad_token_id))) goto done;
    if ((rc = config_validate(&c, path))) goto done;
    *cfg = c;
done:
    json_decref(root);
    return rc;
}

int config_validate(const bert_config *c, const char *source)
{
    const char *s = source ? source : "config";
    struct { const char *name; int v, max; } sizes[] = {
        {"vocab_size", c->vocab_size, MAX_VOCAB},
        {"hidden_size", c->hidden_size, MAX_HIDDEN},
        {"num_hidden_layers", c->num_hidden_layers, MAX_LAYERS},
        {"num_attention_heads", c->num_attention_heads, MAX_HIDDEN},
        {"intermediate_size", c->intermediate_size, MAX_INTERMEDIATE},
        {"max_position_embeddings", c->max_position_embeddings, MAX_POSITIONS},
        {"type_vocab_size", c->type_vocab_size, MAX_TYPE_VOCAB},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v < 1 || sizes[i].v > sizes[i].max)
            return err_set(ERR_INPUT, "%s: field %s: %d is out of range [1, %d]", s, sizes[i].name, sizes[i].v,
                           sizes[i].max);
    if (c->hidden_size % c->num_attention_heads != 0)
        return err_set(ERR_INPUT, "%s: field num_attention_heads: %d does not divide hidden_size %d", s,
                       c->num_attention_heads, c->hidden_size);
    if (!(c->layer_norm_eps > 0) || !isfinite(c->layer_norm_eps))
        return err_set(ERR_INPUT, "%s: field layer_norm_eps: %g must be positive", s, c->layer_norm_eps);
    if (!(c->hidden_dropout_prob >= 0 && c->hidden_dropout_prob < 1))
        return err_set(ERR_INPUT, "%s: field hidden_dropout_prob: %g is not in [0, 1)", s, c->hidden_dropout_prob);
    if (!(c->attention_probs_dropout_prob >= 0 && c->attention_probs_dropout_prob < 1))
        return err_set(ERR_INPUT, "%s: field attention_probs_dropout_prob: %g is not in [0, 1)", s,
                       c->attention_probs_dropout_prob);
    if (!(c->initializer_range >= 0) || !isfinite(c->initializer_range))
        return err_set(ERR_INPUT, "%s: field initializer_range: %g must be non-negative", s, c->initializer_range);
    if (c->pad_token_id < -1 || c->pad_token_id >= c->vocab_size)
        return err_set(ERR_INPUT, "%s: field pad_token_id: %d is not a token id (vocab_size %d)", s, c->pad_token_id,
                       c->vocab_size);
    return 0;
}

/* The shortest decimal that reads back as the same float, so that 0.1f is
 * written 0.1 and 1e-12f 1e-12, as Python writes the values it was given. */
static void float_repr(char *buf, size_t cap, float v)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
}

int config_save(const char *path, const bert_config *c)
{
    int rc = config_validate(c, path);
    if (rc) return rc;
    char ad[32], hd[32], eps[32], ir[32], pad[16], out[2048];
    float_repr(ad, sizeof ad, c->attention_probs_dropout_prob);
    float_repr(hd, sizeof hd, c->hidden_dropout_prob);
    float_repr(eps, sizeof eps, c->layer_norm_eps);
    float_repr(ir, sizeof ir, c->initializer_range);
    if (c->pad_token_id < 0) snprintf(pad, sizeof pad, "null");
    else snprintf(pad, sizeof pad, "%d", c->pad_token_id);
    /* Keys sorted, two-space indent: the layout of save_pretrained. */
    int n = snprintf(out, sizeof out,
                     "{\n"
                     "  \"architectures\": [\n    \"BertForQuestionAnswering\"\n  ],\n"
                     "  \"attention_probs_dropout_prob\": %s,\n"
                     "  \"classifier_dropout\": null,\n"
                     "  \"hidden_act\": \"gelu\",\n"
                     "  \"hidden_dropout_prob\": %s,\n"
                     "  \"hidden_size\": %d,\n"
                     "  \"initializer_range\": %s,\n"
                     "  \"intermediate_size\": %d,\n"
                     "  \"layer_norm_eps\": %s,\n"
                     "  \"max_position_embeddings\": %d,\n"
                     "  \"model_type\": \"bert\",\n"
                     "  \"num_attention_heads\": %d,\n"
                     "  \"num_hidden_layers\": %d,\n"
                     "  \"pad_token_id\": %s,\n"
                     "  \"position_embedding_type\": \"absolute\",\n"
                     "  \"type_vocab_size\": %d,\n"
                     "  \"use_cache\": true,\n"
                     "  \"vocab_size\": %d\n"
                     "}\n",
                     ad, hd, c->hidden_size, ir, c->intermediate_size, eps, c->max_position_embeddings,
                     c->num_attention_heads, c->num_hidden_layers, pad, c->type_vocab_size, c->vocab_size);
    if (n < 0 || (size_t)n >= sizeof out) return err_set(ERR_RUNTIME, "%s: config text too long", path);
    return file_write_atomic(path, out, (size_t)n);
}

static const struct {
    const char *name;
    int L, H, A, I;
} named[] = {
    {"tiny", 2, 128, 2, 512},     {"mini", 4, 256, 4, 1024},     {"small", 4, 512, 8, 2048},
    {"minilm", 6, 384, 12, 1536}, {"base", 12, 768, 12, 3072},   {"large", 24, 1024, 16, 4096},
};

int config_is_named(const char *name)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(named[i].name, name)) return 1;
    return 0;
}

int config_named(const char *name, int vocab_size, bert_config *cfg)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (strcmp(named[i].name, name) != 0) continue;
        bert_config c;
        config_defaults(&c);
        c.vocab_size = vocab_size;
        c.num_hidden_layers = named[i].L;
        c.hidden_size = named[i].H;
        c.num_attention_heads = named[i].A;
        c.intermediate_size = named[i].I;
        int rc = config_validate(&c, name);
        if (rc) return rc;
        *cfg = c;
        return 0;
    }
    return err_set(ERR_INPUT, "unknown config '%s' (named configs: tiny, mini, small, minilm, base, large)", name);
}

double bert_layer_flops(const bert_config *cfg, int T)
{
    /* Not I: <complex.h>, which cblas.h may pull in, defines it. */
    double C = cfg->hidden_size, FF = cfg->intermediate_size, t = T;
    return 6.0 * (4 * C * C + 2 * C * FF) * t + 12.0 * t * t * C;
}

double bert_qa_head_flops(const bert_config *cfg, int T)
{
    return 6.0 * 2 * (double)cfg->hidden_size * T;
}

double bert_stage_flops(const bert_config *cfg, int T, int first, int end, int embeddings, int qa_head)
{
    double f = (double)(end - first) * bert_layer_flops(cfg, T);
    if (embeddings) f += 30.0 * cfg->hidden_size * (double)T;
    if (qa_head) f += bert_qa_head_flops(cfg, T);
    return f;
}

double bert_flops(const bert_config *cfg, int B, int T)
{
    return (double)B * bert_stage_flops(cfg, T, 0, cfg->num_hidden_layers, 0, 1);
}

double bert_forward_flops(const bert_config *cfg, int B, int T)
{
    return bert_flops(cfg, B, T) / 3; /* every term of bert_flops is 6 or 12 x its forward's 2 or 4: exact */
}
