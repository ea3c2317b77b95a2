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
    int pad_token_id;
} bert_config;

/* Reads config.json; unknown fields are ignored. Errors (ERR_INPUT) name the
 * file and the field: hidden_act other than "gelu", heads not dividing
 * hidden, non-positive sizes, malformed JSON (line:column). */
int config_load(const char *path, bert_config *cfg);
/* Writes config.json in the shape transformers writes it
 * (architectures BertForQuestionAnswering, model_type bert). */
int config_save(const char *path, const bert_config *cfg);
/* A named config of DESIGN.md (tiny, mini, small, minilm, base, large) with
 * the given vocabulary size; ERR_INPUT for an unknown name. */
int config_named(const char *name, int vocab_size, bert_config *cfg);
/* Checks the invariants; `source` names the file in the message. */
int config_validate(const bert_config *cfg, const char *source);

#endif
