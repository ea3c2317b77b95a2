/* BERT configuration: the BertConfig fields bertc uses. */
#ifndef BERTC_CONFIG_H
#define BERTC_CONFIG_H

typedef struct {
    int vocab_size;
    int hidden_size;          /* C */
    int num_hidden_layers;    /* L */
    int num_attention_heads;  /* NH */
    int intermediate_size;    /* I */
    int max_position_embeddings;
    int type_vocab_size;
    float layer_norm_eps;
    float hidden_dropout_prob;
    float attention_probs_dropout_prob;
    float initializer_range;
    int pad_token_id;         /* -1: none (config.json "pad_token_id": null) */
} bert_config;

/* transformers' BertConfig defaults (bert-base-uncased sizes, layer_norm_eps
 * 1e-12, dropouts 0.1, initializer_range 0.02, type_vocab_size 2,
 * max_position_embeddings 512, pad_token_id 0). */
void config_defaults(bert_config *cfg);
/* Reads config.json; fields it does not name keep the BertConfig defaults,
 * unknown fields are ignored. Errors (ERR_INPUT) name the file and the
 * field: hidden_act other than "gelu", position_embedding_type other than
 * "absolute", model_type other than "bert", heads not dividing hidden,
 * non-positive sizes, wrong JSON types, malformed JSON (file:line:col). */
int config_load(const char *path, bert_config *cfg);
/* Writes config.json in the shape transformers writes it (sorted keys,
 * architectures BertForQuestionAnswering, model_type bert, hidden_act gelu),
 * atomically. */
int config_save(const char *path, const bert_config *cfg);
/* A named config of DESIGN.md (tiny, mini, small, minilm, base, large) with
 * the given vocabulary size; ERR_INPUT for an unknown name. */
int config_named(const char *name, int vocab_size, bert_config *cfg);
/* 1 when name is one of the named configs. */
int config_is_named(const char *name);
/* Checks the invariants; `source` names the file in the message. */
int config_validate(const bert_config *cfg, const char *source);

/* FLOPs of a training step (forward and backward: 2 per multiply-add
 * forward, 4 backward), the one formula bertc bench, bertc plan's stage
 * split and tests/gpu's benchmark use:
 *   bert_layer_flops  one encoder layer over a window of T tokens:
 *                     6 (4 C^2 + 2 C I) T   its weight products (Q, K, V,
 *                                          output, the FFN)
 *                   + 12 T^2 C             attention (Q K^T and P V, 2 T^2 C
 *                                          each forward, twice that backward)
 *   bert_qa_head_flops  the qa_outputs product: 6 (2 C) T
 *   bert_stage_flops  a pipeline stage over one window: its layers
 *                     [first, end), the QA head when it holds it, and when
 *                     it holds the embeddings their three-row sum and
 *                     LayerNorm, 30 C T (10 forward, 20 backward), which
 *                     weigh in choosing a split (model/memory.h's
 *                     memory_split) but not in bertc bench's count
 *   bert_flops        B windows: B (L bert_layer_flops + bert_qa_head_flops)
 *                     = 6 (L (4 C^2 + 2 C I) + 2 C) B T + 12 L B T^2 C
 *   bert_forward_flops  B windows forward only: a third of bert_flops
 *                     (2 per multiply-add), 2 (L (4 C^2 + 2 C I) + 2 C) B T
 *                     + 4 L B T^2 C
 * LayerNorm, softmax, GELU, dropout, the loss, AdamW and the embedding
 * lookups are not counted (but for a stage's embeddings); padded tokens
 * are (the work is done for them). */
double bert_layer_flops(const bert_config *cfg, int T);
double bert_qa_head_flops(const bert_config *cfg, int T);
double bert_stage_flops(const bert_config *cfg, int T, int first, int end, int embeddings, int qa_head);
double bert_flops(const bert_config *cfg, int B, int T);
double bert_forward_flops(const bert_config *cfg, int B, int T);

#endif
