/* Hugging Face model dirs and safetensors files.
 *
 * safetensors: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}, then the data. The reader mmaps the file and checks
 * everything against the file size before any tensor is touched. Every
 * error message reads "FILE: tensor NAME: what is wrong" (or "FILE: what is
 * wrong" for the file as a whole). Little-endian hosts only, as the format. */
#ifndef BERTC_WEIGHTS_H
#define BERTC_WEIGHTS_H

#include "model/config.h"
#include "model/params.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_F16, ST_BF16, ST_I32, ST_I64 } st_dtype;

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[8];
    size_t numel;
    const void *data; /* inside the mapping; not necessarily aligned */
    size_t nbytes;
} st_tensor;

typedef struct {
    char *path;
    void *map;
    size_t map_len;
    st_tensor *tensors;
    int n;
} st_file;

/* Opens and validates: header length within the file, valid JSON, known
 * dtypes (others: ERR_INPUT naming the tensor and the dtype), shape x dtype
 * size = byte range, ranges inside the data area, no overlaps, no gaps and
 * no trailing bytes (as the safetensors library requires), no duplicate
 * names. */
int st_open(const char *path, st_file *f);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
/* Converts a float tensor (F32, F16 or BF16) to fp32; n must equal numel. */
int st_read_f32(const st_file *f, const st_tensor *t, float *out, size_t n);
/* Converts an integer tensor (I32 or I64) to int64; n must equal numel. */
int st_read_i64(const st_file *f, const st_tensor *t, int64_t *out, size_t n);
const char *st_dtype_name(st_dtype d);

/* Writer: tensors are given as fp32 (ST_F32) or int32 (ST_I32) host arrays. */
typedef struct {
    const char *name;
    st_dtype dtype; /* ST_F32 or ST_I32 */
    int ndim;
    int64_t shape[8];
    const void *data;
} st_entry;
/* Writes atomically (temp file, fsync, rename) unless sync_only, in which
 * case it writes PATH in place and fsyncs it (for files inside a temp dir). */
int st_write(const char *path, const st_entry *entries, int n, int sync_only);

/* A model dir: config.json + model.safetensors (+ vocab.txt). Loads the
 * config, builds the table and fills a new fp32 block (*block, malloc'ed,
 * t->total floats). Names load with or without the "bert." prefix; the
 * pooler is ignored; a missing qa_outputs is initialised N(0,
 * initializer_range) from seed with bias 0 (and *qa_initialised set). A
 * tensor whose shape disagrees with config.json, or a missing tensor, is
 * ERR_INPUT naming the file and the tensor. A dir without
 * model.safetensors but with a TensorFlow checkpoint (a Google BERT dir:
 * bert_config.json + *.ckpt*.index/.data-*, model/tf_bert.h) is read from
 * the checkpoint; pytorch_model.bin and other formats: ERR_INPUT saying how
 * to convert.
 * Non-finite values are ERR_INPUT too. Unknown tensors (other than the
 * pooler and position_ids, ignored silently) are logged once at info level.
 * On error *block is NULL and t is freed. The qa_outputs initialised here
 * equal those model_init_random draws with the same seed. */
int model_load(const char *dir, uint64_t seed, bert_config *cfg, param_table *t, float **block, int *qa_initialised);
/* Writes DIR/config.json and DIR/model.safetensors (F32, transformers
 * names), and copies vocab.txt and tokenizer_config.json from src_dir when
 * given, so that BertForQuestionAnswering.from_pretrained(DIR) loads it.
 * A missing tokenizer_config.json is not invented: AutoTokenizer then uses
 * BertTokenizer's defaults (lower-casing), as for the source dir. */
int model_save(const char *dir, const bert_config *cfg, const param_table *t, const float *block, const char *src_dir);
/* transformers' _init_weights: N(0, initializer_range) for weights and
 * embeddings, LayerNorm 1 and 0, biases 0, the pad_token_id row of the word
 * embeddings 0. Each tensor draws from its own Philox stream, keyed by seed
 * and its name, with Box-Muller in double rounded once to float: the same
 * seed gives the same bytes whatever the thread count. */
void model_init_random(const bert_config *cfg, const param_table *t, float *block, uint64_t seed);

#endif
