/* st_open on arbitrary bytes, then every tensor read back (ASan sees any
 * byte outside the mapping), then model_load of a model dir holding the
 * same bytes as model.safetensors beside a small fixed config.json (layers
 * 1, hidden 8, heads 2, intermediate 16, vocab 16, positions 16): the
 * seeds are real files of that model, so the fuzzer reaches the shape and
 * name checks as well as the header parser. */
#include "fuzz.h"
#include "model/hf_dir.h"
#include "model/safetensors.h"

static const char config_json[] =
    "{\"architectures\": [\"BertForQuestionAnswering\"], \"attention_probs_dropout_prob\": 0.1,"
    " \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": 0.1, \"hidden_size\": 8, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 16, \"layer_norm_eps\": 1e-12, \"max_position_embeddings\": 16,"
    " \"model_type\": \"bert\", \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"pad_token_id\": 0,"
    " \"type_vocab_size\": 2, \"vocab_size\": 16}\n";

static char model_dir[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    snprintf(model_dir, sizeof model_dir, "%s", fuzz_mkdir("model"));
    char name[600];
    snprintf(name, sizeof name, "model/config.json");
    fuzz_write(name, config_json, sizeof config_json - 1);
    return 0;
}

static size_t dtype_size(st_dtype d)
{
    switch (d) {
    case ST_F32: case ST_I32: return 4;
    case ST_F16: case ST_BF16: return 2;
    case ST_I64: return 8;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("model/model.safetensors", data, size);
    st_file f;
    int rc = st_open(path, &f);
    fuzz_check_rc(rc, "st_open");
    if (rc == 0) {
        size_t total = 0;
        for (int i = 0; i < f.n; i++) {
            const st_tensor *t = &f.tensors[i];
            FUZZ_ASSERT(t->nbytes == t->numel * dtype_size(t->dtype), "tensor %d", i);
            FUZZ_ASSERT((const char *)t->data >= (const char *)f.map &&
                            (const char *)t->data + t->nbytes <= (const char *)f.map + f.map_len,
                        "tensor %d lies outside the mapping", i);
            FUZZ_ASSERT(st_find(&f, t->name) != NULL, "tensor %d not found by its name", i);
            total += t->nbytes;
            FUZZ_ASSERT(total <= f.map_len, "tensors hold more bytes than the file");
            if (t->numel == 0) continue;
            if (t->dtype == ST_I32 || t->dtype == ST_I64) {
                int64_t *buf = malloc(t->numel * sizeof *buf);
                FUZZ_ASSERT(buf, "malloc");
                rc = st_read_i64(&f, t, buf, t->numel);
                FUZZ_ASSERT(rc == 0, "st_read_i64: %s", err_msg());
                free(buf);
            } else {
                float *buf = malloc(t->numel * sizeof *buf);
                FUZZ_ASSERT(buf, "malloc");
                rc = st_read_f32(&f, t, buf, t->numel);
                FUZZ_ASSERT(rc == 0, "st_read_f32: %s", err_msg());
                free(buf);
            }
        }
        st_close(&f);
    }
    bert_config cfg;
    param_table t;
    float *block;
    int qa;
    rc = model_load(model_dir, 1, &cfg, &t, &block, &qa);
    fuzz_check_rc(rc, "model_load");
    if (rc == 0) {
        FUZZ_ASSERT(block != NULL && t.total > 0, "model_load returned no parameters");
        free(block);
        param_table_free(&t);
    } else {
        FUZZ_ASSERT(block == NULL, "model_load failed but left a block");
    }
    return 0;
}
