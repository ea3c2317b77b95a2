/* The TensorFlow checkpoint index reader (src/model/tf_bundle.c) on
 * arbitrary bytes. Byte 0 of the input is a switch, the rest is the .index
 * file: with bit 0 of byte 0 set the block checksums are not enforced
 * (tfb_check_block_crc = 0), so that mutations reach the table and protobuf
 * parsers behind them; clear, the reader runs exactly as bertc runs it. The
 * index is written as m/bert_model.ckpt.index beside a 4 KiB shard of zeros
 * and opened with tfb_open; on success every tensor the shard holds is read
 * (its CRC then fails or matches; either way no crash), and the entries must
 * be sorted, in their shard, with size = elements x dtype size for floats. */
#include "fuzz.h"
#include "model/tf_bundle.h"

static char prefix[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    log_quiet(1);
    static unsigned char zeros[4096];
    fuzz_write("bert_model.ckpt.data-00000-of-00001", zeros, sizeof zeros);
    snprintf(prefix, sizeof prefix, "%s", fuzz_path("bert_model.ckpt"));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    tfb_check_block_crc = !(data[0] & 1);
    fuzz_write("bert_model.ckpt.index", data + 1, size - 1);
    tfb_bundle b;
    int rc = tfb_open(prefix, &b);
    fuzz_check_rc(rc, "tfb_open");
    if (rc == 0) {
        FUZZ_ASSERT(b.num_shards >= 1, "num_shards %d", b.num_shards);
        for (int i = 0; i < b.n; i++) {
            const tfb_entry *e = &b.entries[i];
            FUZZ_ASSERT(i == 0 || strcmp(b.entries[i - 1].name, e->name) < 0, "entries not sorted at %d", i);
            FUZZ_ASSERT(tfb_find(&b, e->name) == e, "entry %d not found by its name", i);
            FUZZ_ASSERT(e->shard >= 0 && e->shard < b.num_shards, "shard %d", e->shard);
            FUZZ_ASSERT(e->offset >= 0 && e->size >= 0 && e->offset + e->size <= b.shard_size[e->shard],
                        "entry %d outside its shard", i);
            FUZZ_ASSERT(e->ndim >= 0 && e->ndim <= TFB_MAX_DIMS, "ndim %d", e->ndim);
            if (e->dtype == TFB_DT_FLOAT) FUZZ_ASSERT(e->size == e->numel * 4, "float entry %d size", i);
            if ((e->dtype == TFB_DT_FLOAT || e->dtype == TFB_DT_HALF || e->dtype == TFB_DT_BFLOAT16 ||
                 e->dtype == TFB_DT_DOUBLE) && e->numel <= 4096) {
                float *x = malloc((size_t)e->numel * sizeof *x + 1);
                FUZZ_ASSERT(x, "malloc");
                rc = tfb_read_f32(&b, e, x, (size_t)e->numel);
                fuzz_check_rc(rc, "tfb_read_f32");
                free(x);
            }
        }
        tfb_close(&b);
    }
    return 0;
}
