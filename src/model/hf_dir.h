/* Hugging Face model dirs: config.json, model.safetensors, vocab.txt and
 * tokenizer_config.json, as transformers' save_pretrained writes them and
 * from_pretrained reads them. A Google BERT dir is read too (through
 * model/tf_bert.h). */
#ifndef BERTC_HF_DIR_H
#define BERTC_HF_DIR_H

#include "model/config.h"
#include "model/params.h"

#include <stdint.h>

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

#endif
