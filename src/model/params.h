/* The table of parameters: every tensor of BertForQuestionAnswering, named
 * once. The same table drives the parameter struct, the safetensors reader
 * and writer, weight decay, the optimizer state and the test reports.
 *
 * All parameters live in one fp32 allocation, in table order; bert_params
 * holds pointers into it. Linear weights are [out, in] as in PyTorch. */
#ifndef BERTC_PARAMS_H
#define BERTC_PARAMS_H

#include "model/config.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PARAM_INIT_NORMAL, /* N(0, initializer_range): weights and embeddings */
    PARAM_INIT_ZERO,   /* biases */
    PARAM_INIT_ONE,    /* LayerNorm weight */
} param_init;

typedef struct {
    char name[80];      /* transformers name, e.g. bert.encoder.layer.3.output.dense.weight */
    int ndim;           /* 1 or 2 */
    int64_t shape[2];
    size_t numel;
    size_t offset;      /* in floats, from the start of the parameter block */
    int decay;          /* 1: AdamW weight decay applies (not biases, not LayerNorm) */
    param_init init;
} param_info;

typedef struct {
    float *q_w, *q_b, *k_w, *k_b, *v_w, *v_b;      /* [C,C], [C] */
    float *attn_out_w, *attn_out_b;                /* [C,C], [C] */
    float *attn_ln_w, *attn_ln_b;                  /* [C] */
    float *ffn_in_w, *ffn_in_b;                    /* [I,C], [I] */
    float *ffn_out_w, *ffn_out_b;                  /* [C,I], [C] */
    float *ffn_ln_w, *ffn_ln_b;                    /* [C] */
} bert_layer_params;

typedef struct {
    float *word_emb;   /* [V,C] */
    float *pos_emb;    /* [P,C] */
    float *type_emb;   /* [TV,C] */
    float *emb_ln_w, *emb_ln_b;
    bert_layer_params *layers; /* [L] */
    float *qa_w;       /* [2,C] */
    float *qa_b;       /* [2] */
    int nlayers;
} bert_params;

typedef struct {
    param_info *info;
    int n;
    size_t total; /* floats */
} param_table;

/* Builds the table for cfg (names with the "bert." prefix). */
void param_table_init(param_table *t, const bert_config *cfg);
void param_table_free(param_table *t);
/* Index of a tensor by name, -1 when absent. */
int param_table_find(const param_table *t, const char *name);
/* Points the fields of p into block, which holds the floats [off, off + n)
 * of the table (0, t->total: all of it; a pipeline stage holds its slice):
 * the tensors inside point into block at their offset - off, the others are
 * NULL. p->layers is allocated; free it with bert_params_free. */
void bert_params_bind(bert_params *p, const param_table *t, const bert_config *cfg, float *block, size_t off,
                      size_t n);
void bert_params_free(bert_params *p);

/* Pipeline stages. The table is the embeddings, layers 0..L-1, qa_outputs,
 * in that order, so the tensors of a stage that holds encoder layers
 * [lo, hi), with the embeddings when lo == 0 and the QA head when hi == L,
 * are the contiguous indices [*first, *end). */
void param_table_stage_span(const bert_config *cfg, int lo, int hi, int *first, int *end);
/* The index of encoder layer l's first tensor (l == L: qa_outputs.weight's). */
int param_table_layer_first(const bert_config *cfg, int l);
/* out: tensors [first, end) of t, their offsets counted from tensor
 * first's (an optimizer over a stage's slice of the block). Free with
 * param_table_free. */
void param_table_slice(const param_table *t, int first, int end, param_table *out);

#endif
