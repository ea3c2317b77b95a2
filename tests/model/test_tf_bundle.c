/* The TensorFlow checkpoint reader (src/model/tf_bundle.c) and the Google
 * BERT loader (src/model/tf_bert.c) against a checkpoint written by real
 * TensorFlow (tools/make_tf_checkpoint.py, tests/ref/tf):
 *   - every entry of the index: names, dtypes, shapes, and the Adam slots
 *     and global_step a fine-tuned checkpoint carries;
 *   - the name mapping of every parameter (kernels transposed);
 *   - the logits of the loaded model against transformers' logits computed
 *     from the tensors TensorFlow's own reader gave back (rtol 1e-5, atol
 *     1e-5);
 *   - bad inputs: every truncation of the index, a flipped byte in every
 *     block, a wrong magic, a Snappy-compressed block, num_shards 0, 2000
 *     random mutations with and 2000 without block CRC checks: ERR_INPUT
 *     with a one-line message or success, never a crash. */
#include "backend/backend.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/bert.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "model/tf_bert.h"
#include "model/tf_bundle.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define GOOGLE "tests/ref/tf/google"

static void check_reader(void)
{
    tfb_bundle b;
    int rc = tfb_open(GOOGLE "/bert_model.ckpt", &b);
    CHECK(rc == 0, "tfb_open: %s", err_msg());
    if (rc) return;
    printf("%d tensors, %d shard(s)\n", b.n, b.num_shards);
    CHECK(b.num_shards == 1, "num_shards %d", b.num_shards);
    /* 5 embedding tensors + 16 per layer x 2 + pooler 2 + squad 2 + MLM 5 + NSP 2 = 48, 6 Adam slots, global_step */
    CHECK(b.n == 55, "55 tensors, got %d", b.n);
    for (int i = 1; i < b.n; i++)
        CHECK(strcmp(b.entries[i - 1].name, b.entries[i].name) < 0, "sorted: %s then %s", b.entries[i - 1].name,
              b.entries[i].name);
    const tfb_entry *e = tfb_find(&b, "bert/encoder/layer_1/intermediate/dense/kernel");
    CHECK(e && e->dtype == TFB_DT_FLOAT && e->ndim == 2 && e->shape[0] == 64 && e->shape[1] == 128 &&
              e->size == 64 * 128 * 4,
          "layer_1 intermediate kernel [64, 128] float");
    e = tfb_find(&b, "global_step");
    CHECK(e && e->dtype == TFB_DT_INT64 && e->ndim == 0 && e->size == 8, "global_step: int64 scalar");
    e = tfb_find(&b, "cls/squad/output_weights");
    CHECK(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 64, "cls/squad/output_weights [2, 64]");
    CHECK(tfb_find(&b, "bert/embeddings/LayerNorm/gamma/adam_m") != NULL, "an Adam slot is listed");
    CHECK(tfb_find(&b, "bert/nope") == NULL, "absent name");
    /* Every float tensor reads back with a matching CRC. */
    int nread = 0;
    for (int i = 0; i < b.n; i++) {
        if (b.entries[i].dtype != TFB_DT_FLOAT) continue;
        float *x = malloc((size_t)b.entries[i].numel * sizeof *x + 4);
        rc = tfb_read_f32(&b, &b.entries[i], x, (size_t)b.entries[i].numel);
        CHECK(rc == 0, "read %s: %s", b.entries[i].name, err_msg());
        nread += rc == 0;
        free(x);
    }
    printf("%d float tensors read, CRCs match\n", nread);
    e = tfb_find(&b, "global_step");
    float one;
    CHECK(e && tfb_read_f32(&b, e, &one, 1) == ERR_INPUT, "int64 read as float is refused");
    tfb_close(&b);
}

static void check_names(void)
{
    static const char *const pairs[][3] = {
        {"bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", "0"},
        {"bert.embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", "0"},
        {"bert.embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", "0"},
        {"bert.encoder.layer.11.attention.self.query.weight", "bert/encoder/layer_11/attention/self/query/kernel", "1"},
        {"bert.encoder.layer.0.attention.output.dense.bias", "bert/encoder/layer_0/attention/output/dense/bias", "0"},
        {"bert.encoder.layer.3.output.LayerNorm.weight", "bert/encoder/layer_3/output/LayerNorm/gamma", "0"},
        {"bert.encoder.layer.3.intermediate.dense.weight", "bert/encoder/layer_3/intermediate/dense/kernel", "1"},
        {"qa_outputs.weight", "cls/squad/output_weights", "0"},
        {"qa_outputs.bias", "cls/squad/output_bias", "0"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char got[200];
        int tr = -1;
        int rc = tf_bert_name(pairs[i][0], got, sizeof got, &tr);
        CHECK(rc == 0 && !strcmp(got, pairs[i][1]) && tr == pairs[i][2][0] - '0', "%s -> %s (%d), want %s (%s)",
              pairs[i][0], got, tr, pairs[i][1], pairs[i][2]);
    }
}

static void check_logits(void)
{
    bert_config cfg;
    param_table t;
    float *params = NULL;
    int qa = -1;
    int rc = model_load(GOOGLE, 1, &cfg, &t, &params, &qa);
    CHECK(rc == 0, "model_load of the Google dir: %s", err_msg());
    if (rc) return;
    CHECK(qa == 0, "cls/squad read, not initialised");
    CHECK(cfg.num_hidden_layers == 2 && cfg.hidden_size == 64 && cfg.intermediate_size == 128 && cfg.vocab_size == 100,
          "bert_config.json read");
    CHECK(cfg.layer_norm_eps == 1e-12f, "layer_norm_eps defaults to 1e-12 (bert_config.json has none)");
    st_file ref;
    if (st_open("tests/ref/tf/reference.safetensors", &ref)) {
        CHECK(0, "%s", err_msg());
        return;
    }
    bert_batch batch;
    if (tu_st_batch(&ref, 0, &batch)) return;
    int B = batch.B, T = batch.T;
    size_t BT = (size_t)B * T;
    backend be;
    bert_model *m = NULL;
    if (backend_cpu_create(&be, 2) ||
        bert_model_create(&m, &(bert_model_opts){.cfg = &cfg, .be = &be, .max_B = B, .T = T}) ||
        bert_model_set_params(m, params)) {
        CHECK(0, "setup: %s", err_msg());
        return;
    }
    philox_stream rng = {.seed = 1, .step = 0};
    float *sl = malloc(BT * sizeof *sl), *el = malloc(BT * sizeof *el);
    rc = bert_forward(m, &batch, 0, 0, rng, NULL, sl, el);
    CHECK(rc == 0, "forward: %s", err_msg());
    float *want = tu_st_f32(&ref, "start_logits", BT);
    /* Padded positions: transformers gives them finite logits too; compare all. */
    if (want) tu_close("start_logits (TF checkpoint -> bertc vs transformers)", sl, want, BT, 1e-5, 1e-5), free(want);
    want = tu_st_f32(&ref, "end_logits", BT);
    if (want) tu_close("end_logits (TF checkpoint -> bertc vs transformers)", el, want, BT, 1e-5, 1e-5), free(want);
    free(sl);
    free(el);
    bert_model_free(m);
    backend_free(&be);
    tu_st_batch_free(&batch);
    st_close(&ref);
    free(params);
    param_table_free(&t);
}

/* A pre-trained checkpoint (no cls/squad): qa_outputs initialised exactly as
 * model_init_random initialises them with the same seed. */
static void check_pretrained(void)
{
    bert_config cfg;
    param_table t;
    float *params = NULL;
    int qa = -1;
    int rc = model_load("tests/ref/tf/pretrained", 5, &cfg, &t, &params, &qa);
    CHECK(rc == 0, "model_load of the pre-trained dir: %s", err_msg());
    if (rc) return;
    CHECK(qa == 1, "qa_outputs initialised (%d)", qa);
    float *want = malloc(t.total * sizeof *want);
    model_init_random(&cfg, &t, want, 5);
    int w = param_table_find(&t, "qa_outputs.weight"), b = param_table_find(&t, "qa_outputs.bias");
    CHECK(w >= 0 && b >= 0 && !memcmp(params + t.info[w].offset, want + t.info[w].offset, t.info[w].numel * 4) &&
              !memcmp(params + t.info[b].offset, want + t.info[b].offset, t.info[b].numel * 4),
          "qa_outputs equal model_init_random's with the same seed");
    int e = param_table_find(&t, "bert.embeddings.word_embeddings.weight");
    CHECK(e >= 0 && memcmp(params + t.info[e].offset, want + t.info[e].offset, t.info[e].numel * 4) != 0,
          "the embeddings come from the checkpoint");
    free(want);
    free(params);
    param_table_free(&t);
}

/* The same variables over 4 data shards (a sharded Saver on 3 devices plus
 * global_step's): read back identical to the one-shard dir. */
static void check_sharded(void)
{
    tfb_bundle b;
    int rc = tfb_open("tests/ref/tf/sharded/bert_model.ckpt", &b);
    CHECK(rc == 0, "tfb_open sharded: %s", err_msg());
    if (rc) return;
    int used[8] = {0};
    for (int i = 0; i < b.n; i++)
        if (b.entries[i].shard < 8) used[b.entries[i].shard]++;
    printf("sharded: %d shards, tensors per shard %d %d %d %d\n", b.num_shards, used[0], used[1], used[2], used[3]);
    CHECK(b.num_shards == 4 && used[0] && used[1] && used[2] && used[3], "4 shards, each holding tensors");
    tfb_close(&b);
    bert_config c1, c2;
    param_table t1, t2;
    float *p1 = NULL, *p2 = NULL;
    int rc1 = model_load("tests/ref/tf/sharded", 1, &c1, &t1, &p1, NULL);
    int rc2 = model_load("tests/bad/good/tf", 1, &c2, &t2, &p2, NULL);
    CHECK(rc1 == 0 && rc2 == 0, "both load: %s", err_msg());
    if (rc1 || rc2) return;
    CHECK(t1.total == t2.total && !memcmp(p1, p2, t1.total * sizeof *p1), "sharded and one-shard parameters identical");
    free(p1);
    free(p2);
    param_table_free(&t1);
    param_table_free(&t2);
}

/* Rewrites the CRC of the block at [off, off+size) after an edit. */
static void fix_block_crc(unsigned char *buf, size_t off, size_t size)
{
    uint32_t c = crc32c_mask(crc32c(buf + off, size + 1));
    for (int i = 0; i < 4; i++) buf[off + size + 1 + i] = (unsigned char)(c >> (8 * i));
}

static int parse(const unsigned char *buf, size_t len, const char *what, int want_ok)
{
    tfb_bundle b;
    int rc = tfb_parse_index("x.index", buf, len, &b);
    if (!rc) tfb_close(&b);
    if (want_ok >= 0) CHECK((rc == 0) == want_ok, "%s: rc %d (%s)", what, rc, rc ? err_msg() : "ok");
    if (rc) CHECK(rc == ERR_INPUT && strlen(err_msg()) > 0 && !strchr(err_msg(), '\n'), "%s: one-line ERR_INPUT", what);
    return rc;
}

/* buf = the len bytes of idx with 1 to 4 random bytes changed (an LCG on *s). */
static void mutate(unsigned char *buf, const unsigned char *idx, size_t len, uint64_t *s)
{
    memcpy(buf, idx, len);
    int edits = 1 + (int)(*s % 4);
    for (int j = 0; j < edits; j++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)(*s >> 33) % len;
        buf[at] = (unsigned char)(*s >> 17);
    }
}

static void check_bad(void)
{
    char *text;
    size_t len;
    if (file_read_all(GOOGLE "/bert_model.ckpt.index", &text, &len)) {
        CHECK(0, "%s", err_msg());
        return;
    }
    unsigned char *idx = (unsigned char *)text, *buf = malloc(len);
    parse(idx, len, "the real index", 1);
    /* Every truncation: all fail (the footer is at the end). */
    int ok_trunc = 0;
    for (size_t n = 0; n < len; n++) ok_trunc += parse(idx, n, "truncated", -1) == 0;
    CHECK(ok_trunc == 0, "%d of %zu truncations parsed", ok_trunc, len);
    printf("%zu truncations rejected\n", len);
    /* Every single-byte flip before the footer breaks a block's CRC. */
    int ok_flip = 0;
    for (size_t i = 0; i + 48 < len; i++) {
        memcpy(buf, idx, len);
        buf[i] ^= 0x20;
        ok_flip += parse(buf, len, "flip", -1) == 0;
    }
    /* Bytes in padding between blocks do not exist in TF's layout, so every flip must be caught. */
    CHECK(ok_flip == 0, "%d of %zu byte flips parsed", ok_flip, len - 48);
    printf("%zu byte flips rejected\n", len - 48);
    memcpy(buf, idx, len);
    buf[len - 1] ^= 1;
    parse(buf, len, "bad magic", 0);
    CHECK(strstr(err_msg(), "bad magic") != NULL, "message says bad magic: %s", err_msg());
    /* The first data block at offset 0: make it "Snappy" with a correct CRC. */
    const unsigned char *p = idx + len - 48;
    /* footer: metaindex handle, then index handle; the data block's size is in the index block. */
    (void)p;
    memcpy(buf, idx, len);
    {
        tfb_bundle b;
        /* Find the first data block's size: it ends where its trailer's CRC verifies. */
        size_t size = 0;
        for (size_t s = 4; s + 5 <= len - 48; s++)
            if (crc32c_mask(crc32c(idx, s + 1)) ==
                ((uint32_t)idx[s + 1] | (uint32_t)idx[s + 2] << 8 | (uint32_t)idx[s + 3] << 16 | (uint32_t)idx[s + 4] << 24)) {
                size = s;
                break;
            }
        CHECK(size > 0, "first data block found");
        buf[size] = 1;
        fix_block_crc(buf, 0, size);
        int rc = tfb_parse_index("x.index", buf, len, &b);
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "Snappy"), "Snappy block refused: %s", err_msg());
        if (!rc) tfb_close(&b);
        /* An edited entry with a valid CRC: the header's num_shards 1 -> 0 (byte 4). */
        memcpy(buf, idx, len);
        CHECK(buf[3] == 0x08 && buf[4] == 0x01, "header entry layout as expected");
        buf[4] = 0;
        fix_block_crc(buf, 0, size);
        rc = tfb_parse_index("x.index", buf, len, &b);
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "num_shards 0"), "num_shards 0 refused: %s", err_msg());
        if (!rc) tfb_close(&b);
    }
    /* Random mutations with the block CRCs left as they are, then with the
     * first block's CRC fixed up so that the parser behind it is reached. */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int ok = 0, n = tu_sanitized() ? 300 : 2000;
    for (int k = 0; k < n; k++) {
        mutate(buf, idx, len, &s);
        size_t l = len;
        if (k % 3 == 0) l = (size_t)(s >> 40) % (len + 1);
        ok += parse(buf, l, "mutation", -1) == 0;
    }
    printf("%d random mutations: %d parsed, the rest refused with a message\n", n, ok);
    /* The same with block checksums off (as the fuzz harness can), so that
     * the table and protobuf parsers see the damage. */
    tfb_check_block_crc = 0;
    ok = 0;
    for (int k = 0; k < n; k++) {
        mutate(buf, idx, len, &s);
        ok += parse(buf, len, "mutation without block CRCs", -1) == 0;
    }
    tfb_check_block_crc = 1;
    printf("%d random mutations without block CRCs: %d parsed, the rest refused with a message\n", n, ok);
    free(buf);
    free(text);
}

int main(void)
{
    log_quiet(1);
    check_reader();
    check_names();
    check_logits();
    check_pretrained();
    check_sharded();
    check_bad();
    return tu_done();
}
