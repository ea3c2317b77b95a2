/* TensorFlow checkpoints (the V2 tensor-bundle format) without TensorFlow.
 *
 * A checkpoint PREFIX is PREFIX.index plus PREFIX.data-NNNNN-of-NNNNN shards.
 * The index is a LevelDB-style sorted table: data blocks of prefix-compressed
 * key/value entries with restart points, an index block of block handles, a
 * metaindex block, and a 48-byte footer ending in the table magic. Each
 * block carries a compression byte and the masked CRC-32C of its bytes.
 * The entry with the empty key is a BundleHeaderProto (num_shards,
 * endianness, version); every other key is a tensor name whose value is a
 * BundleEntryProto (dtype, shape, shard_id, offset, size, crc32c of the
 * tensor's bytes).
 *
 * The reader trusts nothing: every varint, length, handle, restart point,
 * key order, protobuf field, shape x dtype size, shard number and byte range
 * is checked before it is used, and a tensor's bytes are read only after
 * their CRC-32C matches. Errors are ERR_INPUT "FILE: where: what" (one line).
 * Snappy-compressed blocks (TF writes none by default) and sliced
 * (partitioned) variables are rejected with a message saying so.
 * Little-endian hosts only, as the format's data. */
#ifndef BERTC_TF_BUNDLE_H
#define BERTC_TF_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

/* TensorFlow's DataType numbers for the types bertc names. */
enum {
    TFB_DT_FLOAT = 1,
    TFB_DT_DOUBLE = 2,
    TFB_DT_INT32 = 3,
    TFB_DT_STRING = 7,
    TFB_DT_INT64 = 9,
    TFB_DT_BOOL = 10,
    TFB_DT_BFLOAT16 = 14,
    TFB_DT_HALF = 19,
};

#define TFB_MAX_DIMS 8
#define TFB_MAX_KEY 4096

typedef struct {
    char *name;
    int dtype;      /* TF DataType number */
    int ndim;
    int64_t shape[TFB_MAX_DIMS];
    int64_t numel;
    int32_t shard;  /* 0 .. num_shards-1 */
    int64_t offset; /* in the shard */
    int64_t size;   /* bytes */
    uint32_t crc32c; /* unmasked CRC-32C of the bytes */
    int has_crc;
} tfb_entry;

typedef struct {
    char *index_path;
    char *prefix;       /* NULL when parsed from memory */
    int num_shards;
    tfb_entry *entries; /* sorted by name, as in the table */
    int n;
    int64_t *shard_size; /* [num_shards], bytes of each data file (after tfb_open) */
} tfb_bundle;

/* Parses an index file held in memory; `path` names it in messages. Checks
 * everything but the shards (their existence and sizes). */
int tfb_parse_index(const char *path, const unsigned char *buf, size_t len, tfb_bundle *b);
/* Reads PREFIX.index, parses it, then checks that every shard exists and
 * that every tensor's byte range lies inside its shard. */
int tfb_open(const char *prefix, tfb_bundle *b);
void tfb_close(tfb_bundle *b);
/* Binary search by name; NULL when absent. */
const tfb_entry *tfb_find(const tfb_bundle *b, const char *name);
/* Reads a FLOAT, HALF, BFLOAT16 or DOUBLE tensor of exactly n elements as
 * fp32, after checking its CRC-32C. Only after tfb_open. */
int tfb_read_f32(const tfb_bundle *b, const tfb_entry *e, float *out, size_t n);
/* 0 only in tests/fuzz/fuzz_tf_index.c, so that mutated inputs get past
 * the block checksums to the parser behind them; 1 everywhere else. */
extern int tfb_check_block_crc;
/* "float", "int64", ... or "dtype N". */
const char *tfb_dtype_name(int dtype, char *buf, size_t cap);

#endif
