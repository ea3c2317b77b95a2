/* The memory planner (memory.h). Every figure comes from the table the
 * allocation itself is sized by, so a change there changes the plan too:
 * parameters from param_table, activations from the activation table
 * (act_sizes.h, through bert_activation_bytes for a whole model), workspace
 * from the CUDA backend's formulas (backend/workspace_rules.h). */
#include "model/memory.h"

#include "backend/workspace_rules.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/piece.h"
#include "core/sat.h"
#include "model/act_sizes.h"
#include "model/bert.h"
#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int memory_parse_recompute(const char *s, recompute_kind *out)
{
    if (s && !strcmp(s, "none")) *out = RECOMPUTE_NONE;
    else if (s && !strcmp(s, "layer")) *out = RECOMPUTE_LAYER;
    else return err_set(ERR_INPUT, "--recompute: '%s' is not one of none, layer", s ? s : "(null)");
    return 0;
}

const char *memory_recompute_name(recompute_kind r)
{
    return r == RECOMPUTE_LAYER ? "layer" : "none";
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Whether the CUDA backend's attention saves the lse (cuda_ws_attention_lse:
 * fp16/bf16 on the flash kernels); low as workspace_bytes'. */
static int att_lse(const bert_config *cfg, int low)
{
    return cuda_ws_attention_lse(low, (size_t)(cfg->hidden_size / cfg->num_attention_heads));
}

/* The CUDA backend's workspace: the fixed buffers plus the largest need
 * of any op one training step runs on N token rows; attention's for
 * micro-batches of `micro` x T (T 0: packed, the varlen kernel needs none),
 * or the flash kernels' for N rows (att_lse), padded or packed. */
static size_t workspace_bytes(const bert_config *cfg, int micro, size_t N, int T, int low)
{
    size_t C = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    size_t NH = (size_t)cfg->num_attention_heads, HS = C / NH;
    size_t need = 0;
    /* 16-bit activations in fp16/bf16 (cuda_ws_act_elem): the GEMMs read
     * them as they are */
    int a16 = cuda_ws_act_elem(low) == 2;
    /* (N, C, OC) of every linear layer: Q/K/V/attention output, the FFN
     * in and out, qa_outputs. */
    const size_t shapes[4][2] = {{C, C}, {C, I}, {I, C}, {C, 2}};
    for (int i = 0; i < 4; i++) {
        need = max_size(need, cuda_ws_matmul_forward(low, a16, N, shapes[i][0], shapes[i][1]));
        need = max_size(need, cuda_ws_matmul_backward(low, a16, N, shapes[i][0], shapes[i][1]));
    }
    /* Q, K and V in one GEMM (matmul_forward_n) */
    need = max_size(need, cuda_ws_matmul_forward_n(low, a16, 3, N, C, C));
    /* flash with 16-bit activations works in place (cuda_ws_act_elem) */
    if (att_lse(cfg, low))
        need = max_size(need, a16 ? cuda_ws_attention_flash16(N, NH) : cuda_ws_attention_flash(N, NH, HS));
    else if (T) need = max_size(need, cuda_ws_attention(low, (size_t)micro, (size_t)T, NH, HS));
    need = max_size(need, cuda_ws_layernorm_backward(N, C));
    need = max_size(need, cuda_ws_fused_ln_backward(N, C)); /* the fused LayerNorm backwards (bert.c's) */
    need = max_size(need, cuda_ws_embedding_backward(N, C, cuda_ws_sort_temp_bound(N)));
    need = max_size(need, cuda_ws_qa_loss((size_t)micro));
    /* adamw_multi's tensor table (an entry per tensor: a rank's pieces or
     * a stage's slice split none) beside the fixed buffers, and the 16-bit
     * copy of the parameters that the GEMMs read */
    param_table t;
    param_table_init(&t, cfg);
    size_t table = cuda_ws_part((size_t)t.n, CUDA_WS_MT_ENTRY), copy = cuda_ws_weight_copy(low, t.total);
    param_table_free(&t);
    return sat_add(sat_add(sat_add(need, CUDA_WS_FIXED), table), copy);
}

static void sum_total(memory_answer *a)
{
    int64_t total = sat_add_i64(a->params, a->grads);
    total = sat_add_i64(total, a->optimizer);
    total = sat_add_i64(total, a->activations);
    a->total = sat_add_i64(total, a->workspace);
}

static int low_precision(precision_kind prec)
{
    return prec == PREC_AUTO || prec == PREC_FP16 || prec == PREC_BF16;
}

int memory_attention_lse(const bert_config *cfg, precision_kind prec)
{
    return att_lse(cfg, low_precision(prec));
}

size_t memory_act_bytes(precision_kind prec)
{
    return cuda_ws_act_elem(low_precision(prec));
}

/* The whole model's padded plan: the checks of every query's sizes. */
static int plan_padded(const memory_query *q, memory_answer *out)
{
    const bert_config *cfg = q->cfg;
    int micro = q->micro, T = q->T;
    precision_kind prec = q->prec;
    recompute_kind rc = q->recompute;
    int r = config_validate(cfg, "memory plan");
    if (r) return r;
    if (micro < 1 || T < 1)
        return err_set(ERR_INPUT, "memory plan: micro-batch %d x %d tokens: both must be at least 1", micro, T);
    if (T > cfg->max_position_embeddings)
        return err_set(ERR_INPUT, "memory plan: sequence length %d exceeds max_position_embeddings %d", T,
                       cfg->max_position_embeddings);
    /* bert_model_create's own limit: every per-op size fits an int. */
    int wide = cfg->intermediate_size > cfg->hidden_size ? cfg->intermediate_size : cfg->hidden_size;
    if ((double)micro * T * wide > INT32_MAX || (double)micro * cfg->num_attention_heads * T * T > 1e15)
        return err_set(ERR_INPUT, "memory plan: micro-batch %d x %d tokens is too large", micro, T);
    if (rc != RECOMPUTE_NONE && rc != RECOMPUTE_LAYER)
        return err_set(ERR_INPUT, "memory plan: unknown recompute mode %d", (int)rc);
    if (prec < PREC_AUTO || prec > PREC_BF16) return err_set(ERR_INPUT, "memory plan: unknown precision %d", (int)prec);

    param_table t;
    param_table_init(&t, cfg);
    size_t n = t.total;
    param_table_free(&t);
    int64_t block = sat_i64(sat_mul(n, sizeof(float)));
    out->n_params = sat_i64(n);
    out->params = block;
    out->grads = block;
    out->optimizer = sat_add_i64(block, block);
    bert_model_opts mo = {.cfg = cfg, .max_B = micro, .T = T, .recompute = rc,
                          .att_lse = att_lse(cfg, low_precision(prec)), .act_bytes = memory_act_bytes(prec)};
    out->activations = sat_i64(bert_activation_bytes(&mo));
    size_t N = sat_mul((size_t)micro, (size_t)T);
    out->workspace = sat_i64(workspace_bytes(cfg, micro, N, T, low_precision(prec)));
    sum_total(out);
    return 0;
}

/* The padded plan turned into the packed one (the sizes checked). */
static void plan_packed(const memory_query *q, memory_answer *out)
{
    bert_model_opts mo = {.cfg = q->cfg, .max_B = q->micro, .T = q->T, .max_tokens = q->max_tokens,
                          .recompute = q->recompute, .att_lse = att_lse(q->cfg, low_precision(q->prec)),
                          .act_bytes = memory_act_bytes(q->prec)};
    out->activations = sat_i64(bert_activation_bytes(&mo));
    out->workspace = sat_i64(workspace_bytes(q->cfg, q->micro, (size_t)q->max_tokens, 0, low_precision(q->prec)));
    sum_total(out);
}

int64_t memory_budget_for_card(int64_t gpu_mem)
{
    return gpu_mem > MEMORY_CONTEXT_RESERVE ? gpu_mem - MEMORY_CONTEXT_RESERVE : 0;
}

char *memory_fmt_bytes(char *buf, size_t cap, int64_t bytes)
{
    double b = (double)bytes;
    if (bytes == INT64_MAX) snprintf(buf, cap, "overflow");
    else if (b >= 1024.0 * 1024 * 1024) snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    else snprintf(buf, cap, "%lld B", (long long)bytes);
    return buf;
}

/* ---- pipeline stages and the sharded optimizer ---- */

/* The activation table (act_sizes.h) grouped by what a pipeline stage
 * keeps, in bytes (ints: the batch's int32 arrays, a count): saved per micro-batch
 * in flight, the embeddings' and one layer's (one x slot is a layer's
 * input), the QA head's (on the last stage, which has one micro-batch in
 * flight), and the working buffers of one backward. One stage with every
 * layer and one micro-batch in flight is bert.c's layout exactly
 * (test_memory checks it against bert_activation_bytes). Not planned: the
 * gradients a stage exchanges with its neighbours (d_out, d_in: one x
 * boundary each per set) and the ints of the sets after the first, which
 * bert.c allocates for a stage of several sets. */
typedef struct {
    size_t emb;   /* emb, its LayerNorm mean and rstd */
    size_t x;     /* one layer boundary (x) */
    size_t layer; /* one layer's tensors besides x: q k v ctx probs res1 ln1 h1 ffn res2 ln2 */
    size_t head;  /* logits, dlogits, loss */
    size_t work;  /* backward's d_* buffers and scratch */
    size_t ints;  /* the batch's int32 arrays */
} act_parts;

static void activation_parts(const bert_config *cfg, int micro, int T, int lse, size_t abytes, act_parts *p)
{
    size_t unit[ACT_COUNT];
    act_units(unit, cfg, micro, T, 0, lse, abytes);
    memset(p, 0, sizeof *p);
    for (int i = 0; i < ACT_COUNT; i++) {
        size_t *part;
        switch (act_scope_of((act_id)i)) {
        case ACT_SCOPE_EMB: part = &p->emb; break;
        case ACT_SCOPE_BOUNDARY: part = &p->x; break;
        case ACT_SCOPE_LAYER: part = &p->layer; break;
        case ACT_SCOPE_HEAD: part = &p->head; break;
        case ACT_SCOPE_WORK: part = &p->work; break;
        default: continue; /* d_out, d_in: not planned (see act_parts) */
        }
        *part = sat_add(*part, unit[i]);
    }
    p->ints = act_int_count(micro, act_rows(micro, T, 0));
}

/* The floats of the stage's parameters, and of the most Adam state one of
 * D ranks holds: per gradient bucket (the embeddings, each layer, the QA
 * head) the last rank's piece (core/piece.h: n/D, plus the n mod D left). */
static void stage_params(const bert_config *cfg, const memory_answer *st, int D, size_t *params, size_t *adam)
{
    param_table t;
    param_table_init(&t, cfg);
    int L = cfg->num_hidden_layers, first = st->layer_first, end = st->layer_end;
    /* bucket b: 0 the embeddings, 1 + l layer l, L + 1 the QA head */
    size_t *bucket = xcalloc((size_t)L + 2, sizeof *bucket);
    *params = *adam = 0;
    for (int i = 0; i < t.n; i++) {
        const char *name = t.info[i].name;
        int l, b;
        if (!strncmp(name, "bert.embeddings.", 16)) b = st->embeddings ? 0 : -1;
        else if (sscanf(name, "bert.encoder.layer.%d.", &l) == 1) b = l >= first && l < end ? 1 + l : -1;
        else b = st->qa_head ? L + 1 : -1; /* qa_outputs */
        if (b < 0) continue;
        bucket[b] += t.info[i].numel;
        *params += t.info[i].numel;
    }
    for (int b = 0; b < L + 2; b++) {
        size_t off, len;
        piece_of(bucket[b], D, D - 1, &off, &len);
        *adam += len;
    }
    free(bucket);
    param_table_free(&t);
}

/* The whole model's plan (in *out) turned into that of stage `stage` of S
 * holding layers [first, end), its optimizer sharded over D ranks. */
static void plan_stage_range(const memory_query *q, int S, int D, int stage, int first, int end, memory_answer *out)
{
    out->layer_first = first;
    out->layer_end = end;
    out->embeddings = stage == 0;
    out->qa_head = stage == S - 1;
    out->in_flight = S - stage;
    size_t np, adam;
    stage_params(q->cfg, out, D, &np, &adam);
    /* the workspace: the whole model's (the largest need of an op either
     * stage runs), with the 16-bit weight copy of the stage's parameters */
    int low = low_precision(q->prec);
    if (out->workspace != INT64_MAX)
        out->workspace +=
            (int64_t)cuda_ws_weight_copy(low, np) - (int64_t)cuda_ws_weight_copy(low, (size_t)out->n_params);
    out->n_params = sat_i64(np);
    out->params = out->grads = sat_i64(sat_mul(np, sizeof(float)));
    out->optimizer = sat_i64(sat_mul(sat_mul(2, adam), sizeof(float)));
    act_parts a;
    activation_parts(q->cfg, q->micro, q->T, att_lse(q->cfg, low_precision(q->prec)), memory_act_bytes(q->prec), &a);
    size_t n = (size_t)(end - first), rec = q->recompute == RECOMPUTE_LAYER;
    size_t saved = sat_add(sat_mul(n + 1, a.x), rec ? 0 : sat_mul(n, a.layer));
    if (out->embeddings) saved = sat_add(saved, a.emb);
    if (out->qa_head) saved = sat_add(saved, a.head);
    size_t work = sat_add(a.work, rec ? a.layer : 0);
    size_t bytes = sat_add(sat_mul((size_t)out->in_flight, saved), work);
    out->activations = sat_i64(sat_add(bytes, sat_mul(a.ints, sizeof(int32_t))));
    sum_total(out);
}

/* The layout's checks; *first, *end: the stage's layers. */
static int stage_layers(const memory_query *q, int S, int D, int *first, int *end)
{
    int L = q->cfg->num_hidden_layers, stage = q->stage;
    if (S < 1 || S > L)
        return err_set(ERR_INPUT, "memory plan: %d pipeline stages for %d layers (1 to %d: each stage at least a layer)",
                       S, L, L);
    if (D < 1) return err_set(ERR_INPUT, "memory plan: %d ranks sharding the optimizer", D);
    if (stage < 0 || stage >= S) return err_set(ERR_INPUT, "memory plan: stage %d of %d", stage, S);
    const int *sp = q->split;
    if (sp && (sp[0] != 0 || sp[S] != L))
        return err_set(ERR_INPUT, "memory plan: the split runs from %d to %d, not 0 to %d", sp[0], sp[S], L);
    for (int s = 0; sp && s < S; s++)
        if (sp[s + 1] <= sp[s])
            return err_set(ERR_INPUT, "memory plan: stage %d of the split holds no layer (%d, %d)", s, sp[s], sp[s + 1]);
    *first = sp ? sp[stage] : (int)((int64_t)L * stage / S);
    *end = sp ? sp[stage + 1] : (int)((int64_t)L * (stage + 1) / S);
    return 0;
}

int memory_plan(const memory_query *q, memory_answer *out)
{
    memset(out, 0, sizeof *out);
    int S = q->stages ? q->stages : 1, D = q->shard_ranks ? q->shard_ranks : 1, first = 0, end = 0;
    if (q->max_tokens && (q->max_tokens < q->T || q->max_tokens > (int64_t)q->micro * q->T))
        return err_set(ERR_INPUT, "memory plan: --max-tokens %lld must be in %d..%lld (the sequence length .. "
                                  "micro-batch x sequence length)",
                       (long long)q->max_tokens, q->T, (long long)q->micro * q->T);
    /* the padded plan of the whole model checks the config and the sizes */
    int r = plan_padded(q, out);
    if (!r) r = stage_layers(q, S, D, &first, &end);
    if (r) return r;
    if (q->max_tokens && S > 1)
        return err_set(ERR_INPUT, "memory plan: packed micro-batches are planned for the whole model, not %d stages",
                       S);
    if (S > 1) {
        plan_stage_range(q, S, D, q->stage, first, end, out);
        return 0;
    }
    out->layer_end = q->cfg->num_hidden_layers;
    out->embeddings = out->qa_head = out->in_flight = 1;
    if (q->max_tokens) plan_packed(q, out);
    if (D > 1) {
        out->optimizer = memory_optimizer_bytes_per_rank(q->cfg, D);
        sum_total(out);
    }
    return 0;
}

/* The split chooser's dynamic programme: cell s * (L + 1) + j for the
 * first s stages holding layers [0, j); best, the least largest stage cost
 * of such a prefix (-1: none), from, that prefix's last boundary. */
typedef struct {
    const memory_query *q;
    const memory_answer *whole;
    int L, S;
    double *best;
    int *from;
} split_dp;

/* One pass: the cost of a stage its time (tmax < 0), or its peak for the
 * stages that take at most tmax (the others left out). Equal costs keep
 * the smaller boundary. */
static int split_pass(split_dp *d, double tmax)
{
    int W = d->L + 1;
    for (int i = 0; i < (d->S + 1) * W; i++) d->best[i] = -1;
    d->best[0] = 0;
    for (int s = 1; s <= d->S; s++)
        for (int j = s; j <= d->L; j++)
            for (int i = s - 1; i < j; i++) {
                double prev = d->best[(s - 1) * W + i];
                double cost = bert_stage_flops(d->q->cfg, d->q->T, i, j, s == 1, s == d->S);
                if (prev < 0 || (tmax >= 0 && cost > tmax)) continue;
                if (tmax >= 0) {
                    memory_answer st = *d->whole;
                    plan_stage_range(d->q, d->S, 1, s - 1, i, j, &st);
                    cost = (double)st.total;
                }
                double m = cost > prev ? cost : prev, *cur = &d->best[s * W + j];
                if (*cur < 0 || m < *cur) {
                    *cur = m;
                    d->from[s * W + j] = i;
                }
            }
    return d->best[d->S * W + d->L] < 0 ? err_set(ERR_RUNTIME, "memory_split: no split within the time") : 0;
}

int memory_split(const memory_query *q, int *split)
{
    int L = q->cfg->num_hidden_layers, S = q->stages;
    memory_query whole_q = {.cfg = q->cfg, .micro = q->micro, .T = q->T, .prec = q->prec, .recompute = q->recompute};
    memory_answer whole;
    int r = plan_padded(&whole_q, &whole);
    if (r) return r;
    if (S < 1 || S > L)
        return err_set(ERR_INPUT, "%d pipeline stages for %d layers (1 to %d: each stage at least a layer)", S, L, L);
    size_t cells = (size_t)(S + 1) * (size_t)(L + 1);
    split_dp d = {&whole_q, &whole, L, S, xcalloc(cells, sizeof(double)), xcalloc(cells, sizeof(int))};
    /* the least largest stage time, then the least largest peak within it */
    r = split_pass(&d, -1);
    if (!r) r = split_pass(&d, d.best[S * (L + 1) + L]);
    if (!r) {
        split[S] = L;
        for (int s = S; s > 0; s--) split[s - 1] = d.from[s * (L + 1) + split[s]];
    }
    free(d.best);
    free(d.from);
    return r;
}

/* Every stage of q's layout fits in budget. */
static int fits(const memory_query *q, int64_t budget)
{
    memory_query t = *q;
    int S = q->stages ? q->stages : 1;
    for (t.stage = 0; t.stage < S; t.stage++) {
        memory_answer a;
        if (memory_plan(&t, &a) != 0 || a.total > budget) return 0;
    }
    return 1;
}

int64_t memory_largest(const memory_query *q, memory_fit what, int64_t budget, int64_t cap)
{
    memory_query t = *q;
    int64_t none = what == MEMORY_FIT_TOKENS ? (int64_t)q->T - 1 : 0, lo = none, hi = cap;
    if (what == MEMORY_FIT_MICRO && hi > INT32_MAX) hi = INT32_MAX;
    /* every stage's peak grows with the micro-batch and with the tokens: bisect for the last that fits */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (what == MEMORY_FIT_TOKENS) t.max_tokens = mid;
        else t.micro = (int)mid;
        if (fits(&t, budget)) lo = mid;
        else hi = mid - 1;
    }
    err_clear();
    return lo > none ? lo : 0;
}

int64_t memory_optimizer_bytes_per_rank(const bert_config *cfg, int ranks)
{
    size_t np, adam;
    memory_answer whole = {.layer_first = 0, .layer_end = cfg->num_hidden_layers, .embeddings = 1, .qa_head = 1};
    stage_params(cfg, &whole, ranks > 1 ? ranks : 1, &np, &adam);
    return sat_i64(sat_mul(sat_mul(2, adam), sizeof(float)));
}
