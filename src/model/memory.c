/* The memory planner (memory.h). Every figure comes from the table the
 * allocation itself is sized by, so a change there changes the plan too:
 * parameters from param_table, activations from bert_activation_bytes,
 * workspace from the CUDA backend's formulas (cuda_ws.h). */
#include "model/memory.h"

#include "backend/cuda/cuda_ws.h"
#include "core/err.h"
#include "model/bert.h"
#include "model/params.h"

#include <stdio.h>
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

static int64_t to_i64(size_t n)
{
    return n >= (size_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

static int64_t add64(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* The CUDA backend's workspace: the fixed buffers plus the largest need
 * of any op one training step runs. */
static size_t workspace_bytes(const bert_config *cfg, int micro, int T, int low)
{
    size_t N = cuda_ws_sat_mul((size_t)micro, (size_t)T);
    size_t C = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    size_t NH = (size_t)cfg->num_attention_heads, HS = C / NH;
    size_t need = 0;
    /* (N, C, OC) of every linear layer: Q/K/V/attention output, the FFN
     * in and out, qa_outputs. */
    const size_t shapes[4][2] = {{C, C}, {C, I}, {I, C}, {C, 2}};
    for (int i = 0; i < 4; i++) {
        need = max_size(need, cuda_ws_matmul_forward(low, N, shapes[i][0], shapes[i][1]));
        need = max_size(need, cuda_ws_matmul_backward(low, N, shapes[i][0], shapes[i][1]));
    }
    need = max_size(need, cuda_ws_attention(low, (size_t)micro, (size_t)T, NH, HS));
    need = max_size(need, cuda_ws_layernorm_backward(N, C));
    need = max_size(need, cuda_ws_embedding_backward(N, C, cuda_ws_sort_temp_bound(N)));
    need = max_size(need, cuda_ws_qa_loss((size_t)micro));
    return cuda_ws_sat_add(need, CUDA_WS_FIXED);
}

int memory_plan_compute(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc,
                        memory_plan *out)
{
    memset(out, 0, sizeof *out);
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
    int64_t block = to_i64(cuda_ws_sat_mul(n, sizeof(float)));
    out->n_params = to_i64(n);
    out->params = block;
    out->grads = block;
    out->optimizer = add64(block, block);
    bert_model_opts mo = {.cfg = cfg, .max_B = micro, .T = T, .recompute = rc};
    out->activations = to_i64(bert_activation_bytes(&mo));
    int low = prec == PREC_AUTO || prec == PREC_FP16 || prec == PREC_BF16;
    out->workspace = to_i64(workspace_bytes(cfg, micro, T, low));
    int64_t total = add64(out->params, out->grads);
    total = add64(total, out->optimizer);
    total = add64(total, out->activations);
    out->total = add64(total, out->workspace);
    return 0;
}

/* The workspace of a packed step: every row op on N = max_tokens rows. */
static size_t workspace_bytes_packed(const bert_config *cfg, int micro, size_t N, int low)
{
    size_t C = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    size_t need = 0;
    const size_t shapes[4][2] = {{C, C}, {C, I}, {I, C}, {C, 2}};
    for (int i = 0; i < 4; i++) {
        need = max_size(need, cuda_ws_matmul_forward(low, N, shapes[i][0], shapes[i][1]));
        need = max_size(need, cuda_ws_matmul_backward(low, N, shapes[i][0], shapes[i][1]));
    }
    need = max_size(need, cuda_ws_layernorm_backward(N, C));
    need = max_size(need, cuda_ws_embedding_backward(N, C, cuda_ws_sort_temp_bound(N)));
    need = max_size(need, cuda_ws_qa_loss((size_t)micro));
    return cuda_ws_sat_add(need, CUDA_WS_FIXED);
}

int memory_plan_compute_tokens(const bert_config *cfg, int micro, int T, int64_t max_tokens, precision_kind prec,
                               recompute_kind rc, memory_plan *out)
{
    if (max_tokens < T || max_tokens > (int64_t)micro * T)
        return err_set(ERR_INPUT, "memory plan: --max-tokens %lld must be in %d..%lld (the sequence length .. "
                                  "micro-batch x sequence length)",
                       (long long)max_tokens, T, (long long)micro * T);
    /* the padded plan of the same windows checks the config and the sizes */
    int r = memory_plan_compute(cfg, micro, T, prec, rc, out);
    if (r) return r;
    int low = prec == PREC_AUTO || prec == PREC_FP16 || prec == PREC_BF16;
    bert_model_opts mo = {.cfg = cfg, .max_B = micro, .T = T, .max_tokens = max_tokens, .recompute = rc};
    out->activations = to_i64(bert_activation_bytes(&mo));
    out->workspace = to_i64(workspace_bytes_packed(cfg, micro, (size_t)max_tokens, low));
    int64_t total = add64(out->params, out->grads);
    total = add64(total, out->optimizer);
    total = add64(total, out->activations);
    out->total = add64(total, out->workspace);
    return 0;
}

int64_t memory_largest_tokens(const bert_config *cfg, int micro, int T, precision_kind prec, recompute_kind rc,
                              int64_t budget, int64_t max_tokens_cap)
{
    memory_plan p;
    if (max_tokens_cap < T || memory_plan_compute_tokens(cfg, micro, T, T, prec, rc, &p) != 0 || p.total > budget) {
        err_clear();
        return 0;
    }
    int64_t lo = T, hi = max_tokens_cap;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (memory_plan_compute_tokens(cfg, micro, T, mid, prec, rc, &p) == 0 && p.total <= budget) lo = mid;
        else hi = mid - 1;
    }
    err_clear();
    return lo;
}

int memory_largest_micro(const bert_config *cfg, int T, precision_kind prec, recompute_kind rc, int64_t budget,
                         int max_micro)
{
    memory_plan p;
    if (max_micro < 1 || memory_plan_compute(cfg, 1, T, prec, rc, &p) != 0) {
        err_clear();
        return 0;
    }
    if (p.total > budget) return 0;
    /* The total grows with the micro-batch: bisect for the last that fits. */
    int lo = 1, hi = max_micro;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (memory_plan_compute(cfg, mid, T, prec, rc, &p) == 0 && p.total <= budget) lo = mid;
        else hi = mid - 1;
    }
    err_clear();
    return lo;
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
