/* BertForQuestionAnswering on a backend: the tensor tables and the forward
 * and backward orchestration. Every op is a call through the backend table;
 * this file owns only the order of the calls and where each tensor lives.
 *
 * Letters: B batch, T sequence, C hidden, NH heads, HS = C/NH, I intermediate,
 * L layers, N = B*T rows.
 *
 * Memory (llm.c style): one block of parameters and one of gradients, in
 * param_table order; one block of activations reached through bert_acts,
 * whose pointers are filled from one table of sizes in bytes
 * (model/act_sizes.h: each tensor's element size, the activations' the
 * backend's type) for the largest micro-batch (max_B x T). A smaller micro-batch uses the front of
 * each buffer. Per-layer activations are L buffers of the same size, side by
 * side.
 *
 * Recompute (--recompute layer): the residual stream x keeps every layer's
 * input, but the other per-layer tensors have one slot, which forward
 * overwrites layer after layer. Backward runs each layer's forward again
 * from its saved input, into that slot, right before the layer's backward
 * (the last layer's activations are still there from forward). The ops are
 * deterministic and each dropout site draws its mask from its own Philox
 * stream (seed, step, stream), so the recomputed tensors are the forward's
 * bit for bit and the gradients equal those without recompute; the cost is
 * one more forward of L - 1 layers.
 *
 * Packed batches (bert_batch.cu_seqlens): the N rows are the windows' real
 * tokens, concatenated; every row op runs on N rows, and attention, the
 * hidden dropouts and the loss take the windows (backend_windows: the
 * offsets d_cu instead of the padded batch's mask), the embeddings each
 * row's position (d_pos). The buffers are sized by tokens: max_rows rows
 * (max_B * T, or max_tokens) and NH * max_rows * T elements of probs per
 * layer, which holds NH sum len^2 for windows of at most T tokens. A padded
 * batch with mask_loss gives the loss its mask too.
 *
 * Pipeline stages (bert_model_opts.stage_lo, stage_hi, sets): a model may hold encoder
 * layers [lo, hi) only, with the embeddings when lo == 0 and the QA head
 * when hi == L. Its parameter and gradient blocks are its slice of the
 * table's (param_table_stage_span), x holds x[lo] .. x[hi], the per-layer
 * tensors its layers. It has `sets` activation sets, one per micro-batch in
 * flight: each holds what backward needs of one micro-batch (x, the layers'
 * tensors, the batch's ints and its scalars below) and the stage's
 * gradients at its ends (d_out, d_in); the backward working buffers, and
 * with recompute the one layer slot, are shared. The model's fields are the
 * current set's (set_use swaps them), so the layer code is the same for a
 * whole model (lo 0, hi L, one set) and a stage. Layer l is at index l - lo.
 *
 * Gradients: bert_backward accumulates (+=) into the gradient block, as the
 * backend ops do, so micro-batches accumulate until bert_zero_grad. The
 * activation gradients are a handful of working buffers reused by every
 * layer; each is zeroed right before a backward op accumulates into it. */
#include "model/bert.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/sat.h"
#include "model/act_sizes.h"
#include "model/pack.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The activation tensors, byte addressed (act_at): activations of the
 * backend's type (m->abytes each) but for the fp32 statistics (mean, rstd)
 * and loss, and probs and d_scratch, floats (act_elem_bytes). */
typedef struct {
    /* Saved by forward for backward. */
    void *emb;                  /* (N,C) word + position + type: embedding LayerNorm input */
    void *emb_mean, *emb_rstd;  /* (N) */
    void *x;                    /* (L+1,N,C) residual stream: x[0] embeddings out, x[l+1] layer l out */
    void *q, *k, *v;            /* (L,N,C) projections, heads as C = NH*HS */
    void *ctx;                  /* (L,N,C) attention context: attention.output.dense input */
    void *probs;                /* (L,B,NH,T,T) softmax before dropout; packed: (L, NH sum len^2); or
                                 * what an attention that saves the lse keeps (att_lse) */
    void *res1;                 /* (L,N,C) dropout(attention.output.dense) + x[l]: LayerNorm input */
    void *ln1_mean, *ln1_rstd;  /* (L,N) */
    void *h1;                   /* (L,N,C) attention block output: FFN input */
    void *ffn_pre;              /* (L,N,I) intermediate.dense out: GELU input */
    void *ffn_act;              /* (L,N,I) GELU out: output.dense input */
    void *res2;                 /* (L,N,C) dropout(output.dense) + h1: LayerNorm input */
    void *ln2_mean, *ln2_rstd;  /* (L,N) */
    void *logits;               /* (N,2) start, end interleaved */
    void *dlogits;              /* (N,2) */
    void *loss;                 /* (1) */
    /* Backward working buffers, one layer's worth. */
    void *d_x;                  /* (N,C) gradient of the residual stream */
    void *d_h1;                 /* (N,C) gradient of h1 */
    void *d_a;                  /* (N,C) gradient before a hidden dropout */
    void *d_ctx;                /* (N,C) */
    void *d_q, *d_k, *d_v;      /* (N,C) */
    void *d_ffn_act, *d_ffn_pre; /* (N,I) */
    void *d_scratch;            /* (B,NH,T,T) attention backward's working memory (packed: as probs; NULL
                                 * where the attention saves the lse) */
    /* Pipeline stages, per set: the gradient of x[hi] from the next stage
     * (not the last stage), the gradient of x[lo] for the previous one (not
     * the first). */
    void *d_out, *d_in;         /* (N,C) */
} bert_acts;

/* What one activation set holds besides its tensors: the batch's ints and
 * the last forward's scalars (the same fields as bert_model's, below). */
typedef struct {
    bert_acts a;
    int32_t *d_ints;
    int Tb, has_labels, packed, N;
    backend_windows win, loss_win;
    float p_hidden, p_attn;
    philox_stream rng;
} act_set;

struct bert_model {
    bert_config cfg;
    param_table table;
    backend *be;
    int max_B, T;
    size_t max_rows;             /* rows (tokens) the buffers hold */
    int att_lse;                 /* the backend's attention saves the lse (backend_attention_saves_lse) */
    size_t abytes;               /* bytes of an activation (backend_act_size) */
    recompute_kind recompute;    /* RECOMPUTE_LAYER: one slot of per-layer activations (see the top) */
    int forward_only;            /* bert_model_opts' (no gradients; activations not written up front) */
    float *params, *grads;
    bert_params p, g;
    void *act_block;
    size_t act_size;             /* bytes of act_block */
    bert_acts a;
    act_strides st;
    int32_t *d_ints;             /* backend: ids, types, mask, pos (max_rows each), start, end (max_B
                                  * each), cu (max_B + 1): the current set's (ints_point) */
    int32_t *d_ids, *d_types, *d_mask, *d_start, *d_end;
    int32_t *d_pos, *d_cu;
    int32_t *h_pos;              /* host: pos (max_rows) */
    float *h_logits;             /* host (max_rows*2), widened from the activation type */
    /* The last forward, for backward. */
    int Tb, has_labels;
    int packed;                  /* rows are the packed windows of d_cu (N of them) */
    int N;                       /* rows */
    backend_windows win;         /* the windows, for attention and dropout */
    backend_windows loss_win;    /* the same, with the mask only when the loss masks padding */
    float p_hidden, p_attn;
    philox_stream rng;
    /* bert_model_set_grads_ready's hook (NULL: none) */
    bert_grads_ready_fn ready;
    void *ready_arg;
    /* The stage (see the top): layers [lo, hi), its tensors as a table of
     * their own (stable) and their floats [poff, poff + stable.total) of
     * the whole table; the activation sets and the one in use. */
    int lo, hi;
    param_table stable;
    size_t poff;
    int nsets, cur;
    act_set *sets;
    int slot_holds;              /* recompute: the set whose layer hi-1 the layer slot holds (-1: none) */
};

/* p + bytes: the activations are addressed by bytes (act_sizes.h). */
static void *act_at(const void *p, size_t bytes)
{
    return (char *)p + bytes;
}

/* The fields of a, in act_sizes' order. */
static void act_fields(bert_acts *a, void **f[ACT_COUNT])
{
    void **ptrs[ACT_COUNT] = {
        &a->emb,     &a->emb_mean, &a->emb_rstd, &a->x,       &a->q,        &a->k,         &a->v,
        &a->ctx,     &a->probs,    &a->res1,     &a->ln1_mean, &a->ln1_rstd, &a->h1,        &a->ffn_pre,
        &a->ffn_act, &a->res2,     &a->ln2_mean, &a->ln2_rstd, &a->logits,   &a->dlogits,   &a->loss,
        &a->d_x,     &a->d_h1,     &a->d_a,      &a->d_ctx,   &a->d_q,      &a->d_k,       &a->d_v,
        &a->d_ffn_act, &a->d_ffn_pre, &a->d_scratch, &a->d_out, &a->d_in,
    };
    memcpy(f, ptrs, sizeof ptrs);
}

static void act_bind(bert_acts *a, void *block, const size_t sizes[ACT_COUNT])
{
    void **f[ACT_COUNT];
    act_fields(a, f);
    for (int i = 0; i < ACT_COUNT; i++) {
        *f[i] = sizes[i] ? block : NULL;
        block = act_at(block, sizes[i]);
    }
}

/* Sets after the first: the per-set tensors one after the other from
 * block; the shared ones are set 0's. */
static void act_bind_more(bert_acts *a, bert_acts *set0, void *block, const size_t sizes[ACT_COUNT],
                          int recompute)
{
    size_t own[ACT_COUNT];
    for (int i = 0; i < ACT_COUNT; i++) own[i] = act_per_set((act_id)i, recompute) ? sizes[i] : 0;
    act_bind(a, block, own);
    void **to[ACT_COUNT], **from[ACT_COUNT];
    act_fields(a, to);
    act_fields(set0, from);
    for (int i = 0; i < ACT_COUNT; i++)
        if (!act_per_set((act_id)i, recompute)) *to[i] = *from[i];
}

/* Names set k's activations to a backend that checks memory
 * (backend_i.annotate), each layer's slice apart, so that a kernel reaching
 * past one into its neighbour in the block is stopped. Sets after the first
 * name only their own tensors. */
static void act_annotate(const backend *be, bert_acts *a, const size_t sizes[ACT_COUNT], int k, int layers,
                         int recompute)
{
    static const char *const names[ACT_COUNT] = {
        "emb", "emb_mean", "emb_rstd", "x", "q", "k", "v", "ctx", "probs", "res1", "ln1_mean", "ln1_rstd",
        "h1", "ffn_pre", "ffn_act", "res2", "ln2_mean", "ln2_rstd", "logits", "dlogits", "loss", "d_x", "d_h1",
        "d_a", "d_ctx", "d_q", "d_k", "d_v", "d_ffn_act", "d_ffn_pre", "d_scratch", "d_out", "d_in"};
    if (!be->i->annotate) return;
    void **f[ACT_COUNT];
    act_fields(a, f);
    for (int i = 0; i < ACT_COUNT; i++) {
        if (!*f[i] || !sizes[i] || (k > 0 && !act_per_set((act_id)i, recompute))) continue;
        act_scope sc = act_scope_of((act_id)i);
        int slices = sc == ACT_SCOPE_BOUNDARY ? layers + 1 : sc == ACT_SCOPE_LAYER && !recompute ? layers : 1;
        size_t n = sizes[i] / (size_t)slices;
        for (int l = 0; l < slices; l++) {
            char name[64];
            snprintf(name, sizeof name, slices > 1 ? "activation set %d %s[%d]" : "activation set %d %s", k, names[i], l);
            be->i->annotate(be->ctx, act_at(*f[i], (size_t)l * n), n, name);
        }
    }
}

/* o's stage: layers [*lo, *hi) and activation sets, the defaults (0) filled
 * in; non-zero when they do not fit the model. */
static int stage_of(const bert_model_opts *o, int *lo, int *hi, int *sets)
{
    int L = o->cfg->num_hidden_layers;
    *lo = o->stage_lo;
    *hi = o->stage_hi ? o->stage_hi : L;
    *sets = o->sets ? o->sets : 1;
    return *lo < 0 || *hi <= *lo || *hi > L || *sets < 1;
}

size_t bert_activation_bytes(const bert_model_opts *o)
{
    int lo, hi, sets;
    if (o->max_B <= 0 || o->T <= 0 || o->max_tokens < 0 || stage_of(o, &lo, &hi, &sets)) return 0;
    size_t bytes = act_total(o->cfg, o->max_B, o->T, o->max_tokens, o->att_lse, o->act_bytes,
                             o->recompute == RECOMPUTE_LAYER, lo, hi, sets);
    size_t ints = sat_mul(act_int_count(o->max_B, act_rows(o->max_B, o->T, o->max_tokens)), (size_t)sets);
    return sat_add(bytes, sat_mul(ints, sizeof(int32_t)));
}

void bert_model_free(bert_model *m)
{
    if (!m) return;
    const backend_i *i = m->be ? m->be->i : NULL;
    if (i) {
        if (m->params) i->release(m->be->ctx, m->params);
        if (m->grads) i->release(m->be->ctx, m->grads);
        if (m->act_block) i->release(m->be->ctx, m->act_block);
        if (m->sets && m->sets[0].d_ints) i->release(m->be->ctx, m->sets[0].d_ints);
    }
    bert_params_free(&m->p);
    bert_params_free(&m->g);
    param_table_free(&m->table);
    if (m->stable.info) param_table_free(&m->stable);
    free(m->sets);
    free(m->h_logits);
    free(m->h_pos);
    free(m);
}

/* The batch's int arrays from base: ids, types, mask, pos (max_rows
 * each), start, end (max_B each), cu (max_B + 1). */
static void ints_point(bert_model *m, int32_t *base)
{
    size_t BT = m->max_rows;
    m->d_ints = base;
    m->d_ids = base;
    m->d_types = m->d_ids + BT;
    m->d_mask = m->d_types + BT;
    m->d_pos = m->d_mask + BT;
    m->d_start = m->d_pos + BT;
    m->d_end = m->d_start + m->max_B;
    m->d_cu = m->d_end + m->max_B;
}

/* The activation sets: the model's fields are set m->cur's; set_use(m, s)
 * keeps them in m->sets[m->cur] and takes set s's. The windows point into
 * the set's own ints, so they travel with it. */
static void set_save(bert_model *m, act_set *t)
{
    t->a = m->a;
    t->d_ints = m->d_ints;
    t->Tb = m->Tb;
    t->has_labels = m->has_labels;
    t->packed = m->packed;
    t->N = m->N;
    t->win = m->win;
    t->loss_win = m->loss_win;
    t->p_hidden = m->p_hidden;
    t->p_attn = m->p_attn;
    t->rng = m->rng;
}

static void set_use(bert_model *m, int s)
{
    if (s == m->cur) return;
    set_save(m, &m->sets[m->cur]);
    const act_set *t = &m->sets[s];
    m->a = t->a;
    ints_point(m, t->d_ints);
    m->Tb = t->Tb;
    m->has_labels = t->has_labels;
    m->packed = t->packed;
    m->N = t->N;
    m->win = t->win;
    m->loss_win = t->loss_win;
    m->p_hidden = t->p_hidden;
    m->p_attn = t->p_attn;
    m->rng = t->rng;
    m->cur = s;
}

int bert_model_create(bert_model **out, const bert_model_opts *o)
{
    const bert_config *cfg = o->cfg;
    backend *be = o->be;
    int max_B = o->max_B, T = o->T;
    int64_t max_tokens = o->max_tokens;
    *out = NULL;
    int rc = config_validate(cfg, "bert_model_create");
    if (rc) return rc;
    int lo, hi, sets;
    if (stage_of(o, &lo, &hi, &sets))
        return err_set(ERR_INPUT, "bert_model_create: stage of layers [%d, %d) with %d activation sets in a model of "
                                  "%d layers", lo, hi, sets, cfg->num_hidden_layers);
    if (max_B < 1 || T < 1)
        return err_set(ERR_INPUT, "bert_model_create: micro-batch %d x %d tokens: both must be at least 1", max_B, T);
    if (T > cfg->max_position_embeddings)
        return err_set(ERR_INPUT, "bert_model_create: sequence length %d exceeds max_position_embeddings %d", T,
                       cfg->max_position_embeddings);
    if (o->recompute != RECOMPUTE_NONE && o->recompute != RECOMPUTE_LAYER)
        return err_set(ERR_INPUT, "bert_model_create: unknown recompute mode %d", (int)o->recompute);
    if (max_tokens < 0 || (max_tokens > 0 && max_tokens < T))
        return err_set(ERR_INPUT, "bert_model_create: --max-tokens %lld is below the sequence length %d",
                       (long long)max_tokens, T);
    /* The backend ops take int sizes: every per-call size must fit. */
    double N = max_tokens > 0 ? (double)max_tokens : (double)max_B * T;
    if (N * (cfg->intermediate_size > cfg->hidden_size ? cfg->intermediate_size : cfg->hidden_size) > INT32_MAX ||
        N * cfg->num_attention_heads * T > 1e15)
        return err_set(ERR_INPUT, "bert_model_create: micro-batch %d x %d tokens is too large", max_B, T);

    bert_model *m = xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    m->be = be;
    m->max_B = max_B;
    m->T = T;
    m->recompute = o->recompute;
    m->forward_only = o->forward_only;
    m->max_rows = act_rows(max_B, T, max_tokens);
    m->att_lse = backend_attention_saves_lse(be, cfg->hidden_size / cfg->num_attention_heads);
    m->abytes = backend_act_size(be);
    m->lo = lo;
    m->hi = hi;
    m->nsets = sets;
    m->slot_holds = -1;
    m->sets = xcalloc((size_t)sets, sizeof *m->sets);
    param_table_init(&m->table, cfg);
    int t0, t1;
    param_table_stage_span(cfg, lo, hi, &t0, &t1);
    param_table_slice(&m->table, t0, t1, &m->stable);
    m->poff = m->table.info[t0].offset;
    size_t pbytes = mul_size(m->stable.total, sizeof(float));
    void *c = be->ctx;
    m->params = be->i->alloc(c, pbytes);
    if (!m->params) goto fail;
    be->i->zero(c, m->params, pbytes);
    bert_params_bind(&m->p, &m->table, cfg, m->params, m->poff, m->stable.total);
    if (!m->forward_only) {
        m->grads = be->i->alloc(c, pbytes);
        if (!m->grads) goto fail;
        be->i->zero(c, m->grads, pbytes);
        bert_params_bind(&m->g, &m->table, cfg, m->grads, m->poff, m->stable.total);
    }

    size_t sizes[ACT_COUNT];
    int rec = m->recompute == RECOMPUTE_LAYER;
    act_sizes(sizes, cfg, max_B, T, max_tokens, m->att_lse, m->abytes, rec, lo, hi);
    m->act_size = act_total(cfg, max_B, T, max_tokens, m->att_lse, m->abytes, rec, lo, hi, sets);
    m->st = act_strides_for(cfg, max_B, T, max_tokens, m->att_lse, m->abytes);
    m->act_block = be->i->alloc(c, m->act_size);
    if (!m->act_block) goto fail;
    /* Written once now, so that its pages are the process's from the start:
     * a packed micro-batch uses only its N rows of each layer's slot, and
     * without this every step longer than all before it would first-touch
     * new pages (the kernel clearing them: 7 % of a base-shape packed step
     * in the first steps, by perf). A forward-only model does not: answers
     * touch a small part of the block (a packed batch's rows, attention's
     * sum of len^2), and clearing all of it up front cost more than the
     * pages it saves (10 % of a short predict). */
    if (!m->forward_only) be->i->zero(c, m->act_block, m->act_size);
    act_bind(&m->sets[0].a, m->act_block, sizes);
    void *more = m->act_block;
    for (int i = 0; i < ACT_COUNT; i++) more = act_at(more, sizes[i]);
    for (int k = 1; k < sets; k++) {
        act_bind_more(&m->sets[k].a, &m->sets[0].a, more, sizes, rec);
        for (int i = 0; i < ACT_COUNT; i++)
            if (act_per_set((act_id)i, rec)) more = act_at(more, sizes[i]);
    }
    for (int k = 0; k < sets; k++) act_annotate(be, &m->sets[k].a, sizes, k, hi - lo, rec);

    size_t BT = m->max_rows, nints = act_int_count(max_B, BT);
    int32_t *ints = be->i->alloc(c, mul_size(mul_size(nints, (size_t)sets), sizeof(int32_t)));
    if (!ints) goto fail;
    for (int k = 0; k < sets; k++) m->sets[k].d_ints = ints + (size_t)k * nints;
    m->a = m->sets[0].a;
    ints_point(m, ints);
    m->h_logits = malloc(BT * 2 * sizeof(float));
    m->h_pos = malloc(BT * sizeof(int32_t));
    if (!m->h_logits || !m->h_pos) {
        err_set(ERR_RUNTIME, "bert_model_create: out of memory for %zu host logits", BT * 2);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    rc = err_code() ? err_code() : ERR_RUNTIME;
    err_wrap(rc, "bert_model_create (L%d H%d, micro-batch %d x %d)", cfg->num_hidden_layers, cfg->hidden_size,
             max_B, T);
    bert_model_free(m);
    return rc;
}

const bert_config *bert_model_config(const bert_model *m) { return &m->cfg; }
int bert_model_max_batch(const bert_model *m) { return m->max_B; }
int64_t bert_model_max_tokens(const bert_model *m) { return (int64_t)m->max_rows; }

int bert_model_seq_len(const bert_model *m) { return m->T; }
recompute_kind bert_model_recompute(const bert_model *m) { return m->recompute; }
const param_table *bert_model_table(const bert_model *m) { return &m->table; }
backend *bert_model_backend(bert_model *m) { return m->be; }
float *bert_model_params(bert_model *m) { return m->params; }
float *bert_model_grads(bert_model *m) { return m->grads; }

const param_table *bert_model_stage_table(const bert_model *m) { return &m->stable; }

void bert_model_stage(const bert_model *m, int *lo, int *hi, size_t *param_offset)
{
    if (lo) *lo = m->lo;
    if (hi) *hi = m->hi;
    if (param_offset) *param_offset = m->poff;
}

int bert_model_set_params(bert_model *m, const float *host)
{
    int rc = m->be->i->upload(m->be->ctx, m->params, host + m->poff, m->stable.total * sizeof(float));
    return rc ? err_wrap(rc, "bert_model_set_params") : 0;
}

int bert_model_get_params(bert_model *m, float *host)
{
    int rc = m->be->i->download(m->be->ctx, host + m->poff, m->params, m->stable.total * sizeof(float));
    return rc ? err_wrap(rc, "bert_model_get_params") : 0;
}

void bert_zero_grad(bert_model *m)
{
    if (m->grads) m->be->i->zero(m->be->ctx, m->grads, m->stable.total * sizeof(float));
}

backend_act *bert_stage_x_in(bert_model *m, int set)
{
    return set >= 0 && set < m->nsets ? m->sets[set].a.x : NULL;
}

const backend_act *bert_stage_x_out(bert_model *m, int set)
{
    return set >= 0 && set < m->nsets ? act_at(m->sets[set].a.x, (size_t)(m->hi - m->lo) * m->st.nc) : NULL;
}

backend_act *bert_stage_dx_out(bert_model *m, int set)
{
    return set >= 0 && set < m->nsets ? m->sets[set].a.d_out : NULL;
}

const backend_act *bert_stage_dx_in(bert_model *m, int set)
{
    return set >= 0 && set < m->nsets ? m->sets[set].a.d_in : NULL;
}

size_t bert_model_act_size(const bert_model *m) { return m->abytes; }
int bert_model_sets(const bert_model *m) { return m->nsets; }

/* Window b's length in a packed batch, or its real tokens (a prefix of
 * ones in the mask) in a padded one; -1 when the mask is not a prefix. */
static int window_len(const bert_batch *b, int r)
{
    if (b->cu_seqlens) return b->cu_seqlens[r + 1] - b->cu_seqlens[r];
    const int32_t *mk = b->attention_mask + (size_t)r * b->T;
    int n = pack_window_len(mk, b->T);
    for (int t = n; t < b->T; t++)
        if (mk[t] != 0) return -1;
    return n;
}

static int check_batch(const bert_model *m, const bert_batch *b, float ph, float pa)
{
    if (b->B < 1 || b->B > m->max_B)
        return err_set(ERR_INPUT, "bert_forward: batch of %d rows; this model holds 1 to %d", b->B, m->max_B);
    if (b->T < 1 || b->T > m->T)
        return err_set(ERR_INPUT, "bert_forward: sequence of %d tokens; this model holds 1 to %d", b->T, m->T);
    int packed = b->cu_seqlens != NULL;
    if (!b->input_ids || !b->token_type_ids || (!packed && !b->attention_mask))
        return err_set(ERR_INPUT, "bert_forward: input_ids, token_type_ids and attention_mask are required");
    if ((b->start_positions == NULL) != (b->end_positions == NULL))
        return err_set(ERR_INPUT, "bert_forward: start_positions and end_positions go together");
    if (!(ph >= 0 && ph < 1) || !(pa >= 0 && pa < 1))
        return err_set(ERR_INPUT, "bert_forward: dropout probabilities %g, %g must be in [0, 1)", ph, pa);
    size_t rows = (size_t)b->B * b->T;
    if (packed) {
        if (b->cu_seqlens[0] != 0)
            return err_set(ERR_INPUT, "bert_forward: cu_seqlens[0] = %d, not 0", b->cu_seqlens[0]);
        for (int r = 0; r < b->B; r++) {
            int len = b->cu_seqlens[r + 1] - b->cu_seqlens[r];
            if (len < 1 || len > b->T)
                return err_set(ERR_INPUT, "bert_forward: packed window %d has %d tokens; windows hold 1 to %d", r,
                               len, b->T);
        }
        rows = (size_t)b->cu_seqlens[b->B];
    }
    if (rows > m->max_rows)
        return err_set(ERR_INPUT, "bert_forward: %zu tokens in the micro-batch; this model holds %zu", rows,
                       m->max_rows);
    for (size_t i = 0; i < rows; i++) {
        int r = packed ? 0 : (int)(i / (size_t)b->T), t = packed ? (int)i : (int)(i % (size_t)b->T);
        if (b->input_ids[i] < 0 || b->input_ids[i] >= m->cfg.vocab_size)
            return err_set(ERR_INPUT, "bert_forward: input_ids[%d][%d] = %d outside the vocabulary (0..%d)", r, t,
                           b->input_ids[i], m->cfg.vocab_size - 1);
        if (b->token_type_ids[i] < 0 || b->token_type_ids[i] >= m->cfg.type_vocab_size)
            return err_set(ERR_INPUT, "bert_forward: token_type_ids[%d][%d] = %d outside 0..%d", r, t,
                           b->token_type_ids[i], m->cfg.type_vocab_size - 1);
        if (!packed && b->attention_mask[i] != 0 && b->attention_mask[i] != 1)
            return err_set(ERR_INPUT, "bert_forward: attention_mask[%d][%d] = %d is neither 0 nor 1", r, t,
                           b->attention_mask[i]);
    }
    if (packed || b->mask_loss)
        for (int r = 0; r < b->B; r++) {
            int len = window_len(b, r);
            if (len < 1)
                return err_set(ERR_INPUT, "bert_forward: row %d: a masked loss needs its attention mask to be ones "
                                          "then zeros, at least one token", r);
            for (int side = 0; b->start_positions && side < 2; side++) {
                int32_t pos = side ? b->end_positions[r] : b->start_positions[r];
                if (pos >= len && pos < b->T)
                    return err_set(ERR_INPUT, "bert_forward: window %d: %s position %d is padding (window of %d tokens)",
                                   r, side ? "end" : "start", pos, len);
            }
        }
    return 0;
}

static philox_stream stream_at(philox_stream rng, int layer, int site)
{
    rng.stream = bert_dropout_stream(layer, site);
    return rng;
}

/* Layer l's saved tensors: its own slot, or the one slot with recompute. */
typedef struct {
    void *q, *k, *v, *ctx, *probs, *res1, *ln1_mean, *ln1_rstd, *h1, *ffn_pre, *ffn_act, *res2, *ln2_mean, *ln2_rstd;
} layer_acts;

static layer_acts layer_at(const bert_model *m, int l)
{
    const bert_acts *a = &m->a;
    const act_strides *s = &m->st;
    size_t i = m->recompute ? 0 : (size_t)(l - m->lo);
    layer_acts t = {
        act_at(a->q, i * s->nc),        act_at(a->k, i * s->nc),        act_at(a->v, i * s->nc),
        act_at(a->ctx, i * s->nc),      act_at(a->probs, i * s->att),   act_at(a->res1, i * s->nc),
        act_at(a->ln1_mean, i * s->n1), act_at(a->ln1_rstd, i * s->n1), act_at(a->h1, i * s->nc),
        act_at(a->ffn_pre, i * s->ni),  act_at(a->ffn_act, i * s->ni),  act_at(a->res2, i * s->nc),
        act_at(a->ln2_mean, i * s->n1), act_at(a->ln2_rstd, i * s->n1),
    };
    return t;
}

/* Encoder layer l: x[l] -> x[l + 1], saving what backward needs in the
 * layer's slot; dropout as m->p_hidden, m->p_attn with masks from m->rng. */
static void hidden_dropout(bert_model *m, backend_act *x, philox_stream rng)
{
    m->be->i->dropout_forward(m->be->ctx, x, x, &m->win, m->cfg.hidden_size, m->p_hidden, rng);
}

/* sum = residual + dropout(sum), out = LayerNorm(sum), mean and rstd saved
 * (BertSelfOutput, BertOutput) as the backend's one fused op: 1 when it
 * ran, 0 when the caller runs the ops it fuses (no op, or sizes it
 * declines). */
static int residual_ln_fused(bert_model *m, backend_act *out, float *mean, float *rstd, backend_act *sum,
                             const backend_act *residual, const float *w, const float *b, philox_stream rng)
{
    const backend_i *o = m->be->i;
    return o->residual_layernorm_forward &&
           !o->residual_layernorm_forward(m->be->ctx, out, sum, mean, rstd, residual, sum, w, b, &m->win,
                                          m->cfg.hidden_size, m->cfg.layer_norm_eps, m->p_hidden, rng);
}

static void layer_forward(bert_model *m, int l)
{
    const backend_i *o = m->be->i;
    void *c = m->be->ctx;
    const bert_config *cfg = &m->cfg;
    int C = cfg->hidden_size, I = cfg->intermediate_size, NH = cfg->num_attention_heads;
    int N = m->N, HS = C / NH;
    size_t NC = (size_t)N * C, NI = (size_t)N * I;
    float eps = cfg->layer_norm_eps, ph = m->p_hidden;
    const bert_layer_params *w = &m->p.layers[l];
    const backend_act *xin = act_at(m->a.x, (size_t)(l - m->lo) * m->st.nc);
    backend_act *xout = act_at(m->a.x, (size_t)(l - m->lo + 1) * m->st.nc);
    layer_acts t = layer_at(m, l);

    if (o->matmul_forward_n) {
        backend_act *const qkv[3] = {t.q, t.k, t.v};
        const float *const qkv_w[3] = {w->q_w, w->k_w, w->v_w}, *const qkv_b[3] = {w->q_b, w->k_b, w->v_b};
        o->matmul_forward_n(c, 3, qkv, xin, qkv_w, qkv_b, N, C, C);
    } else {
        o->matmul_forward(c, t.q, xin, w->q_w, w->q_b, N, C, C);
        o->matmul_forward(c, t.k, xin, w->k_w, w->k_b, N, C, C);
        o->matmul_forward(c, t.v, xin, w->v_w, w->v_b, N, C, C);
    }
    /* a forward-only model saves no probabilities where the backend can skip them */
    backend_act *probs = m->forward_only && o->probs_optional ? NULL : t.probs;
    o->attention_forward(c, t.ctx, probs, t.q, t.k, t.v, &m->win, NH, HS, m->p_attn,
                         stream_at(m->rng, l, DROPOUT_ATTN_PROBS));
    o->matmul_forward(c, t.res1, t.ctx, w->attn_out_w, w->attn_out_b, N, C, C);
    if (!residual_ln_fused(m, t.h1, t.ln1_mean, t.ln1_rstd, t.res1, xin, w->attn_ln_w, w->attn_ln_b,
                           stream_at(m->rng, l, DROPOUT_ATTN_OUT))) {
        if (ph > 0) hidden_dropout(m, t.res1, stream_at(m->rng, l, DROPOUT_ATTN_OUT));
        o->add(c, t.res1, t.res1, xin, NC);
        o->layernorm_forward(c, t.h1, t.ln1_mean, t.ln1_rstd, t.res1, w->attn_ln_w, w->attn_ln_b, N, C, eps);
    }

    o->matmul_forward(c, t.ffn_pre, t.h1, w->ffn_in_w, w->ffn_in_b, N, C, I);
    o->gelu_forward(c, t.ffn_act, t.ffn_pre, NI);
    o->matmul_forward(c, t.res2, t.ffn_act, w->ffn_out_w, w->ffn_out_b, N, I, C);
    if (!residual_ln_fused(m, xout, t.ln2_mean, t.ln2_rstd, t.res2, t.h1, w->ffn_ln_w, w->ffn_ln_b,
                           stream_at(m->rng, l, DROPOUT_FFN_OUT))) {
        if (ph > 0) hidden_dropout(m, t.res2, stream_at(m->rng, l, DROPOUT_FFN_OUT));
        o->add(c, t.res2, t.res2, t.h1, NC);
        o->layernorm_forward(c, xout, t.ln2_mean, t.ln2_rstd, t.res2, w->ffn_ln_w, w->ffn_ln_b, N, C, eps);
    }
}

/* Whether the embeddings run as the backend's fused ops, and the fp32
 * [N, C] scratch the backward one writes (NULL: the unfused ops). Both
 * directions or neither: the fused forward does not write emb, which the
 * unfused backward reads (a backend declines the same sizes in both). The
 * scratch is a working buffer free by then: d_h1 while activations are
 * fp32, else d_ffn_act (N x I activations) where that holds it. */
static float *emb_fused_scratch(const bert_model *m)
{
    const backend_i *o = m->be->i;
    size_t es = m->abytes, need = (size_t)m->cfg.hidden_size * sizeof(float);
    if (!o->embedding_layernorm_forward || !o->embedding_layernorm_backward) return NULL;
    if ((size_t)m->cfg.hidden_size * es >= need) return m->a.d_h1;
    return (size_t)m->cfg.intermediate_size * es >= need ? m->a.d_ffn_act : NULL;
}

/* x[0] = dropout(LayerNorm(word + position + type)) as the fused op: 1
 * when it ran, 0 when the caller runs the ops it fuses. */
static int embeddings_fused(bert_model *m, philox_stream rng)
{
    const bert_acts *a = &m->a;
    const bert_params *p = &m->p;
    return emb_fused_scratch(m) &&
           !m->be->i->embedding_layernorm_forward(m->be->ctx, a->x, a->emb_mean, a->emb_rstd, m->d_ids, m->d_types,
                                                  m->packed ? m->d_pos : NULL, p->word_emb, p->pos_emb, p->type_emb,
                                                  p->emb_ln_w, p->emb_ln_b, &m->win, m->cfg.hidden_size,
                                                  m->cfg.layer_norm_eps, m->p_hidden, rng);
}

/* The forward of the current set: the embeddings when the model has them,
 * its layers, the QA head and the loss when it has them. */
static int forward_set(bert_model *m, const bert_batch *b, float dropout_hidden, float dropout_attn, philox_stream rng,
                       float *loss, float *start_logits, float *end_logits)
{
    m->has_labels = 0;
    int rc = check_batch(m, b, dropout_hidden, dropout_attn);
    if (rc) return rc;
    const backend_i *o = m->be->i;
    void *c = m->be->ctx;
    const bert_config *cfg = &m->cfg;
    int packed = b->cu_seqlens != NULL;
    int B = b->B, T = b->T, C = cfg->hidden_size, L = cfg->num_hidden_layers;
    int N = packed ? b->cu_seqlens[B] : B * T;
    float eps = cfg->layer_norm_eps, ph = dropout_hidden, pa = dropout_attn;
    int labels = b->start_positions != NULL;
    int first = m->lo == 0, last = m->hi == L;

    /* what layer_forward and the ops below read */
    m->Tb = T;
    m->N = N;
    m->packed = packed;
    m->p_hidden = ph;
    m->p_attn = pa;
    m->rng = rng;

    size_t bt = (size_t)N * sizeof(int32_t);
    if ((rc = o->upload(c, m->d_ids, b->input_ids, bt)) || (rc = o->upload(c, m->d_types, b->token_type_ids, bt)) ||
        (!packed && (rc = o->upload(c, m->d_mask, b->attention_mask, bt))))
        return err_wrap(rc, "bert_forward: batch upload");
    if (packed) {
        /* host: each row's position in its window, and the longest window */
        int max_len = 0;
        for (int r = 0; r < B; r++) {
            int len = window_len(b, r);
            if (len > max_len) max_len = len;
            for (int t = 0; t < len; t++) m->h_pos[b->cu_seqlens[r] + t] = t;
        }
        if ((rc = o->upload(c, m->d_pos, m->h_pos, bt)) ||
            (rc = o->upload(c, m->d_cu, b->cu_seqlens, (size_t)(B + 1) * sizeof(int32_t))))
            return err_wrap(rc, "bert_forward: window upload");
        m->win = backend_windows_packed(m->d_cu, B, T, N, max_len);
        m->loss_win = m->win;
    } else {
        m->win = backend_windows_padded(B, T, m->d_mask);
        m->loss_win = backend_windows_padded(B, T, b->mask_loss ? m->d_mask : NULL);
    }
    if (labels && ((rc = o->upload(c, m->d_start, b->start_positions, (size_t)B * sizeof(int32_t))) ||
                   (rc = o->upload(c, m->d_end, b->end_positions, (size_t)B * sizeof(int32_t)))))
        return err_wrap(rc, "bert_forward: label upload");

    const bert_acts *a = &m->a;
    const act_strides *s = &m->st;
    const bert_params *p = &m->p;

    /* not the first stage: x[lo] is the previous stage's output, placed by the caller */
    if (first && !embeddings_fused(m, stream_at(rng, -1, DROPOUT_EMBEDDINGS))) {
        o->embedding_forward(c, a->emb, m->d_ids, m->d_types, packed ? m->d_pos : NULL, p->word_emb, p->pos_emb,
                             p->type_emb, N, T, C);
        o->layernorm_forward(c, a->x, a->emb_mean, a->emb_rstd, a->emb, p->emb_ln_w, p->emb_ln_b, N, C, eps);
        if (ph > 0) hidden_dropout(m, a->x, stream_at(rng, -1, DROPOUT_EMBEDDINGS));
    }

    for (int l = m->lo; l < m->hi; l++) layer_forward(m, l);
    m->slot_holds = m->cur;
    if (last) o->matmul_forward(c, a->logits, act_at(a->x, (size_t)(L - m->lo) * s->nc), p->qa_w, p->qa_b, N, C, 2);
    if (last && labels) o->qa_loss(c, a->loss, a->dlogits, a->logits, m->d_start, m->d_end, &m->loss_win, 1.0f);

    if ((rc = o->sync(c))) return err_wrap(rc, "bert_forward");
    if (last && labels && loss && (rc = o->download(c, loss, a->loss, sizeof(float))))
        return err_wrap(rc, "bert_forward: loss download");
    if (last && (start_logits || end_logits)) {
        if ((rc = backend_act_download(m->be, m->h_logits, a->logits, (size_t)N * 2)))
            return err_wrap(rc, "bert_forward: logits download");
        for (int i = 0; i < N; i++) {
            if (start_logits) start_logits[i] = m->h_logits[2 * i];
            if (end_logits) end_logits[i] = m->h_logits[2 * i + 1];
        }
    }
    m->has_labels = labels;
    return 0;
}

int bert_forward(bert_model *m, const bert_batch *b, float dropout_hidden, float dropout_attn, philox_stream rng,
                 float *loss, float *start_logits, float *end_logits)
{
    set_use(m, 0);
    return forward_set(m, b, dropout_hidden, dropout_attn, rng, loss, start_logits, end_logits);
}

int bert_stage_forward(bert_model *m, int set, const bert_batch *b, float dropout_hidden, float dropout_attn,
                       philox_stream rng, float *loss, float *start_logits, float *end_logits)
{
    if (set < 0 || set >= m->nsets)
        return err_set(ERR_RUNTIME, "bert_stage_forward: activation set %d of %d", set, m->nsets);
    set_use(m, set);
    return forward_set(m, b, dropout_hidden, dropout_attn, rng, loss, start_logits, end_logits);
}

/* The gradient before a hidden dropout: d_a = dropout_backward(dout), or
 * dout itself when dropout is off. */
static const backend_act *dropout_back(bert_model *m, const backend_act *dout, size_t n, philox_stream rng)
{
    if (m->p_hidden <= 0) return dout;
    m->be->i->zero(m->be->ctx, m->a.d_a, n * m->abytes);
    m->be->i->dropout_backward(m->be->ctx, m->a.d_a, dout, &m->win, m->cfg.hidden_size, m->p_hidden, rng);
    return m->a.d_a;
}

/* residual_ln_fused's backward from dout, or the ops it fuses where the
 * backend has no such op: dres (zeroed by the caller) += d(sum); returns
 * the gradient before the dropout as dropout_back gives it: in d_a (zeroed
 * here: the fused op accumulates), or with dropout off dres itself, which
 * then holds d(sum) alone. */
static const backend_act *residual_ln_back(bert_model *m, backend_act *dres, float *dw, float *db,
                                           const backend_act *dout, const backend_act *sum, const float *w,
                                           const float *mean, const float *rstd, philox_stream rng)
{
    const backend_i *o = m->be->i;
    int C = m->cfg.hidden_size;
    if (o->residual_layernorm_backward) {
        backend_act *dx = m->p_hidden > 0 ? m->a.d_a : NULL;
        if (dx) o->zero(m->be->ctx, dx, (size_t)m->N * C * m->abytes);
        if (!o->residual_layernorm_backward(m->be->ctx, dres, dx, dw, db, dout, sum, mean, rstd, w, &m->win, C,
                                            m->p_hidden, rng))
            return dx ? dx : dres;
    }
    o->layernorm_backward(m->be->ctx, dres, dw, db, dout, sum, w, mean, rstd, m->N, C);
    return dropout_back(m, dres, (size_t)m->N * C, rng);
}

/* The embeddings' backward from d_x as the fused op (emb_fused_scratch):
 * it writes the LayerNorm input's gradient to the scratch (=), so nothing
 * is zeroed. 1 when it ran. */
static int embeddings_back_fused(bert_model *m, philox_stream rng)
{
    const bert_acts *a = &m->a;
    const bert_params *p = &m->p, *g = &m->g;
    float *scratch = emb_fused_scratch(m);
    return scratch &&
           !m->be->i->embedding_layernorm_backward(m->be->ctx, g->word_emb, g->pos_emb, g->type_emb, g->emb_ln_w,
                                                   g->emb_ln_b, scratch, a->d_x, m->d_ids, m->d_types,
                                                   m->packed ? m->d_pos : NULL, a->emb_mean, a->emb_rstd,
                                                   p->word_emb, p->pos_emb, p->type_emb, p->emb_ln_w, &m->win,
                                                   m->cfg.hidden_size, m->p_hidden, rng);
}

void bert_model_set_grads_ready(bert_model *m, bert_grads_ready_fn fn, void *arg)
{
    m->ready = fn;
    m->ready_arg = arg;
}

int bert_grad_bucket_count(const bert_model *m) { return m->cfg.num_hidden_layers + 2; }

/* Bucket k in backward's order (0: the QA head, 1..L: layers L-1..0,
 * L+1: the embeddings) as [*off, *off + *n) of this model's gradient
 * block: the table is embeddings, layers 0..L-1, qa_outputs, contiguous.
 * 0 when the bucket is not this stage's. */
static int grad_bucket(const bert_model *m, int k, size_t *off, size_t *n)
{
    int L = m->cfg.num_hidden_layers;
    const param_table *t = &m->table;
    /* the start of layer l's tensors, layer L's being the QA head's */
    #define LAYER_START(l) (t->info[param_table_layer_first(&m->cfg, (l))].offset)
    size_t lo, hi;
    if (k == 0) lo = LAYER_START(L), hi = t->total;
    else if (k <= L) lo = LAYER_START(L - k), hi = LAYER_START(L - k + 1);
    else lo = 0, hi = LAYER_START(0);
    #undef LAYER_START
    if (lo < m->poff || hi > m->poff + m->stable.total) return 0;
    *off = lo - m->poff;
    *n = hi - lo;
    return 1;
}

static int grads_ready(bert_model *m, int k)
{
    if (!m->ready) return 0;
    size_t off, n;
    if (!grad_bucket(m, k, &off, &n)) return 0;
    return m->ready(m->ready_arg, off, n);
}

int bert_grad_buckets_emit(bert_model *m, int from)
{
    int rc = 0;
    for (int k = from < 0 ? 0 : from; k < bert_grad_bucket_count(m) && !rc; k++) rc = grads_ready(m, k);
    return rc;
}

/* The backward of the current set: from the loss on the last stage, from
 * d_out (the next stage's d(x[hi])) on the others; down to the embeddings
 * on the first, to d_in = d(x[lo]) on the others. */
static int backward_set(bert_model *m, float grad_scale)
{
    if (m->forward_only) return err_set(ERR_RUNTIME, "bert_backward: the model was built forward-only (answers)");
    if (!m->has_labels)
        return err_set(ERR_RUNTIME, "bert_backward: the last bert_forward had no labels (or failed)");
    const backend_i *o = m->be->i;
    void *c = m->be->ctx;
    const bert_config *cfg = &m->cfg;
    int T = m->Tb, C = cfg->hidden_size, I = cfg->intermediate_size, NH = cfg->num_attention_heads;
    int N = m->N, HS = C / NH, L = cfg->num_hidden_layers;
    size_t NC = (size_t)N * C, NI = (size_t)N * I, fNC = NC * m->abytes, fNI = NI * m->abytes;
    const bert_acts *a = &m->a;
    const act_strides *s = &m->st;
    const bert_params *p = &m->p;
    const bert_params *g = &m->g;
    philox_stream rng = m->rng;
    int first = m->lo == 0, last = m->hi == L, rc = 0;

    if (last) {
        /* The loss again, now with the scale: dlogits = grad_scale * dloss/dlogits
         * computed as the backend computes it, not rescaled afterwards. */
        o->qa_loss(c, a->loss, a->dlogits, a->logits, m->d_start, m->d_end, &m->loss_win, grad_scale);
        o->zero(c, a->d_x, fNC);
        o->matmul_backward(c, a->d_x, g->qa_w, g->qa_b, a->dlogits, act_at(a->x, (size_t)(L - m->lo) * s->nc),
                           p->qa_w, N, C, 2);
        rc = grads_ready(m, 0);
    } else {
        o->copy(c, a->d_x, a->d_out, fNC);
    }

    for (int l = m->hi - 1; l >= m->lo && !rc; l--) {
        const bert_layer_params *w = &p->layers[l];
        const bert_layer_params *gw = &g->layers[l];
        const backend_act *xin = act_at(a->x, (size_t)(l - m->lo) * s->nc);
        /* The layer slot still holds the last layer's forward when this
         * set's forward was the last one. Recomputing writes x[l + 1] again,
         * with the same values; nothing reads it any more. */
        if (m->recompute == RECOMPUTE_LAYER && (l < m->hi - 1 || m->slot_holds != m->cur)) layer_forward(m, l);
        layer_acts t = layer_at(m, l);

        /* FFN block: d_x holds d(layer output). d_h1 collects d(h1) from the
         * residual and, last, from intermediate.dense. */
        o->zero(c, a->d_h1, fNC);
        const backend_act *d_out = residual_ln_back(m, a->d_h1, gw->ffn_ln_w, gw->ffn_ln_b, a->d_x, t.res2,
                                                    w->ffn_ln_w, t.ln2_mean, t.ln2_rstd,
                                                    stream_at(rng, l, DROPOUT_FFN_OUT));
        o->zero(c, a->d_ffn_act, fNI);
        o->matmul_backward(c, a->d_ffn_act, gw->ffn_out_w, gw->ffn_out_b, d_out, t.ffn_act, w->ffn_out_w, N, I, C);
        o->zero(c, a->d_ffn_pre, fNI);
        o->gelu_backward(c, a->d_ffn_pre, t.ffn_pre, a->d_ffn_act, NI);
        o->matmul_backward(c, a->d_h1, gw->ffn_in_w, gw->ffn_in_b, a->d_ffn_pre, t.h1, w->ffn_in_w, N, C, I);

        /* Attention block: d_x is free now and collects d(x[l]) the same way. */
        o->zero(c, a->d_x, fNC);
        d_out = residual_ln_back(m, a->d_x, gw->attn_ln_w, gw->attn_ln_b, a->d_h1, t.res1, w->attn_ln_w, t.ln1_mean,
                                 t.ln1_rstd, stream_at(rng, l, DROPOUT_ATTN_OUT));
        o->zero(c, a->d_ctx, fNC);
        o->matmul_backward(c, a->d_ctx, gw->attn_out_w, gw->attn_out_b, d_out, t.ctx, w->attn_out_w, N, C, C);
        o->zero(c, a->d_q, fNC);
        o->zero(c, a->d_k, fNC);
        o->zero(c, a->d_v, fNC);
        o->attention_backward(c, a->d_q, a->d_k, a->d_v, a->d_scratch, a->d_ctx, t.q, t.k, t.v, t.probs, &m->win,
                              NH, HS, m->p_attn, stream_at(rng, l, DROPOUT_ATTN_PROBS));
        o->matmul_backward(c, a->d_x, gw->q_w, gw->q_b, a->d_q, xin, w->q_w, N, C, C);
        o->matmul_backward(c, a->d_x, gw->k_w, gw->k_b, a->d_k, xin, w->k_w, N, C, C);
        o->matmul_backward(c, a->d_x, gw->v_w, gw->v_b, a->d_v, xin, w->v_w, N, C, C);
        rc = grads_ready(m, L - l);
    }
    if (m->recompute == RECOMPUTE_LAYER) m->slot_holds = -1;
    if (rc) return err_wrap(rc, "bert_backward");
    if (!first) {
        o->copy(c, a->d_in, a->d_x, fNC);
        rc = o->sync(c);
        return rc ? err_wrap(rc, "bert_backward") : 0;
    }

    if (!embeddings_back_fused(m, stream_at(rng, -1, DROPOUT_EMBEDDINGS))) {
        const backend_act *d_emb_ln = dropout_back(m, a->d_x, NC, stream_at(rng, -1, DROPOUT_EMBEDDINGS));
        o->zero(c, a->d_h1, fNC);
        o->layernorm_backward(c, a->d_h1, g->emb_ln_w, g->emb_ln_b, d_emb_ln, a->emb, p->emb_ln_w, a->emb_mean,
                              a->emb_rstd, N, C);
        o->embedding_backward(c, g->word_emb, g->pos_emb, g->type_emb, a->d_h1, m->d_ids, m->d_types,
                              m->packed ? m->d_pos : NULL, N, T, C);
    }
    /* transformers builds word_embeddings with padding_idx = pad_token_id:
     * that row never receives a gradient. The row holds nothing else, so
     * clearing it keeps the accumulated sum of every micro-batch right. */
    if (cfg->pad_token_id >= 0 && cfg->pad_token_id < cfg->vocab_size)
        o->zero(c, g->word_emb + (size_t)cfg->pad_token_id * C, (size_t)C * sizeof(float));
    rc = grads_ready(m, L + 1);

    if (!rc) rc = o->sync(c);
    return rc ? err_wrap(rc, "bert_backward") : 0;
}

int bert_backward(bert_model *m, float grad_scale) { return backward_set(m, grad_scale); }

int bert_stage_backward(bert_model *m, int set, float grad_scale)
{
    if (set < 0 || set >= m->nsets)
        return err_set(ERR_RUNTIME, "bert_stage_backward: activation set %d of %d", set, m->nsets);
    set_use(m, set);
    return backward_set(m, grad_scale);
}
