#include "model/params.h"
#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(param_table *t, const char *name, int64_t d0, int64_t d1, param_init init, int decay)
{
    param_info *p = &t->info[t->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    p->offset = t->total;
    p->init = init;
    p->decay = decay;
    t->total += p->numel;
}

/* A Linear layer: weight [out,in] decays, bias does not. */
static void add_linear(param_table *t, const char *prefix, int64_t out, int64_t in)
{
    char n[80];
    snprintf(n, sizeof n, "%s.weight", prefix);
    add(t, n, out, in, PARAM_INIT_NORMAL, 1);
    snprintf(n, sizeof n, "%s.bias", prefix);
    add(t, n, out, 0, PARAM_INIT_ZERO, 0);
}

static void add_layernorm(param_table *t, const char *prefix, int64_t c)
{
    char n[80];
    snprintf(n, sizeof n, "%s.weight", prefix);
    add(t, n, c, 0, PARAM_INIT_ONE, 0);
    snprintf(n, sizeof n, "%s.bias", prefix);
    add(t, n, c, 0, PARAM_INIT_ZERO, 0);
}

void param_table_init(param_table *t, const bert_config *cfg)
{
    int64_t C = cfg->hidden_size, I = cfg->intermediate_size;
    t->n = 0;
    t->total = 0;
    t->info = xcalloc((size_t)(5 + 16 * cfg->num_hidden_layers + 2), sizeof *t->info);
    /* Embeddings decay like any weight in transformers' recipes (only bias and LayerNorm are excluded). */
    add(t, "bert.embeddings.word_embeddings.weight", cfg->vocab_size, C, PARAM_INIT_NORMAL, 1);
    add(t, "bert.embeddings.position_embeddings.weight", cfg->max_position_embeddings, C, PARAM_INIT_NORMAL, 1);
    add(t, "bert.embeddings.token_type_embeddings.weight", cfg->type_vocab_size, C, PARAM_INIT_NORMAL, 1);
    add_layernorm(t, "bert.embeddings.LayerNorm", C);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        char p[80];
#define LAYER(suffix) (snprintf(p, sizeof p, "bert.encoder.layer.%d.%s", l, suffix), p)
        add_linear(t, LAYER("attention.self.query"), C, C);
        add_linear(t, LAYER("attention.self.key"), C, C);
        add_linear(t, LAYER("attention.self.value"), C, C);
        add_linear(t, LAYER("attention.output.dense"), C, C);
        add_layernorm(t, LAYER("attention.output.LayerNorm"), C);
        add_linear(t, LAYER("intermediate.dense"), I, C);
        add_linear(t, LAYER("output.dense"), C, I);
        add_layernorm(t, LAYER("output.LayerNorm"), C);
#undef LAYER
    }
    add_linear(t, "qa_outputs", 2, C);
}

void param_table_free(param_table *t)
{
    free(t->info);
    t->info = NULL;
    t->n = 0;
}

int param_table_find(const param_table *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->info[i].name, name)) return i;
    return -1;
}

/* Tensor k in a block holding [off, off + n) of the table, or NULL. */
static float *tensor_at(const param_table *t, int k, float *block, size_t off, size_t n)
{
    const param_info *p = &t->info[k];
    return p->offset >= off && p->offset - off + p->numel <= n ? block + (p->offset - off) : NULL;
}

void bert_params_bind(bert_params *p, const param_table *t, const bert_config *cfg, float *block, size_t off,
                      size_t n)
{
    /* Table order is fixed by param_table_init; walk it in the same order. */
    int k = 0;
#define NEXT tensor_at(t, k++, block, off, n)
    p->word_emb = NEXT;
    p->pos_emb = NEXT;
    p->type_emb = NEXT;
    p->emb_ln_w = NEXT;
    p->emb_ln_b = NEXT;
    p->nlayers = cfg->num_hidden_layers;
    p->layers = xcalloc((size_t)(p->nlayers ? p->nlayers : 1), sizeof *p->layers);
    for (int l = 0; l < p->nlayers; l++) {
        bert_layer_params *L = &p->layers[l];
        L->q_w = NEXT; L->q_b = NEXT;
        L->k_w = NEXT; L->k_b = NEXT;
        L->v_w = NEXT; L->v_b = NEXT;
        L->attn_out_w = NEXT; L->attn_out_b = NEXT;
        L->attn_ln_w = NEXT; L->attn_ln_b = NEXT;
        L->ffn_in_w = NEXT; L->ffn_in_b = NEXT;
        L->ffn_out_w = NEXT; L->ffn_out_b = NEXT;
        L->ffn_ln_w = NEXT; L->ffn_ln_b = NEXT;
    }
    p->qa_w = NEXT;
    p->qa_b = NEXT;
#undef NEXT
}

void bert_params_free(bert_params *p)
{
    free(p->layers);
    p->layers = NULL;
}

/* param_table_init's layout: 5 embedding tensors, 16 per layer, 2 for the head. */
int param_table_layer_first(const bert_config *cfg, int l)
{
    (void)cfg;
    return 5 + 16 * l;
}

void param_table_stage_span(const bert_config *cfg, int lo, int hi, int *first, int *end)
{
    int L = cfg->num_hidden_layers;
    *first = lo == 0 ? 0 : param_table_layer_first(cfg, lo);
    *end = hi == L ? param_table_layer_first(cfg, L) + 2 : param_table_layer_first(cfg, hi);
}

void param_table_slice(const param_table *t, int first, int end, param_table *out)
{
    out->n = end - first;
    out->info = xcalloc((size_t)(out->n > 0 ? out->n : 1), sizeof *out->info);
    out->total = 0;
    size_t base = first < t->n ? t->info[first].offset : t->total;
    for (int i = 0; i < out->n; i++) {
        out->info[i] = t->info[first + i];
        out->info[i].offset -= base;
        out->total = out->info[i].offset + out->info[i].numel;
    }
}
