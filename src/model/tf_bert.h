/* Google BERT checkpoints (google-research/bert's modeling.py and
 * run_squad.py names) loaded into bertc's parameter table.
 *
 * A Google BERT dir holds bert_config.json, vocab.txt and a checkpoint
 * PREFIX.index + PREFIX.data-*; the prefix is the one named by the dir's
 * `checkpoint` file (model_checkpoint_path), or else the single *.ckpt*.index
 * in the dir. Names map as transformers' load_tf_weights_in_bert mapped them:
 *   bert/embeddings/word_embeddings            bert.embeddings.word_embeddings.weight
 *   bert/.../LayerNorm/gamma | beta            ....LayerNorm.weight | bias
 *   bert/encoder/layer_N/attention/self/query/kernel
 *                                              bert.encoder.layer.N.attention.self.query.weight (transposed:
 *                                              TF kernels are [in, out], PyTorch weights [out, in])
 *   cls/squad/output_weights | output_bias     qa_outputs.weight | bias (run_squad.py's [2, H], not transposed)
 * Adam slots (NAME/adam_m, NAME/adam_v), global_step, the pooler and the
 * pre-training heads (cls/predictions, cls/seq_relationship) are skipped. A
 * checkpoint without cls/squad (a pre-trained one) gets qa_outputs
 * initialised as model_load does. */
#ifndef BERTC_TF_BERT_H
#define BERTC_TF_BERT_H

#include "model/config.h"
#include "model/params.h"

#include <stddef.h>
#include <stdint.h>

/* The checkpoint prefix of a dir: *found 1 (prefix written) or 0 (the dir
 * holds no checkpoint); an error code for a `checkpoint` file naming a
 * missing checkpoint, or several checkpoints and no `checkpoint` file. */
int tf_find_checkpoint(const char *dir, char *prefix, size_t cap, int *found);
/* Loads config_path (bert_config.json or config.json) and the checkpoint
 * PREFIX into a new fp32 block, as model_load does for safetensors: shapes
 * checked against the config (messages name PREFIX.index and the TF name),
 * values finite, every tensor's CRC-32C checked. */
int tf_bert_load(const char *config_path, const char *prefix, uint64_t seed, bert_config *cfg, param_table *t,
                 float **block, int *qa_initialised);
/* Writes a Hugging Face model dir DST (config.json, model.safetensors,
 * vocab.txt, tokenizer_config.json, which BertForQuestionAnswering /
 * AutoTokenizer .from_pretrained load) from a Google checkpoint:
 * config_path, PREFIX, vocab_path. tokenizer_config.json says
 * do_lower_case = lower_case (0 or 1); with lower_case -1 it is src_dir's
 * tokenizer_config.json when there is one, else do_lower_case true (as bertc
 * reads such a dir). *qa_initialised as tf_bert_load. Files are written
 * atomically; on error the caller removes DST if it created it. */
int tf_bert_export(const char *config_path, const char *prefix, const char *vocab_path, const char *src_dir,
                   int lower_case, const char *dst, uint64_t seed, int *qa_initialised);
/* SRC is a Google dir (its checkpoint found by tf_find_checkpoint) or a
 * checkpoint prefix (DIR/model.ckpt-1000) whose dir holds bert_config.json
 * (or config.json) and vocab.txt: fills prefix, config, vocab and dir (each
 * cap bytes). ERR_INPUT for an HF dir (model.safetensors) or no checkpoint. */
int tf_bert_resolve(const char *src, char *prefix, char *config, char *vocab_out, char *dir, size_t cap);
/* tf_bert_resolve(src) then tf_bert_export into dst (created). */
int tf_bert_export_dir(const char *src, const char *dst, int lower_case, uint64_t seed, int *qa_initialised);
/* 1 when DIR holds no model.safetensors but a TF checkpoint (an index named
 * *.ckpt*.index or a `checkpoint` file). */
int tf_bert_is_google_dir(const char *dir);
/* The TF name of a parameter-table name and whether it is transposed;
 * 0 on success, -1 for a name outside the table's scheme. */
int tf_bert_name(const char *hf_name, char *tf_name, size_t cap, int *transposed);

#endif
