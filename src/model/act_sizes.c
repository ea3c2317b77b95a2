/* The activation table (act_sizes.h). */
#include "model/act_sizes.h"

#include "backend/backend.h"
#include "core/sat.h"

/* n elements of esize bytes, rounded up to 64 bytes: every tensor of the
 * block stays 64-byte aligned. */
static size_t round64(size_t n, size_t esize)
{
    return sat_round_up(sat_mul(n, esize), 64);
}

size_t act_elem_bytes(act_id i, size_t abytes)
{
    switch (i) {
    case ACT_EMB_MEAN: case ACT_EMB_RSTD: case ACT_LN1_MEAN: case ACT_LN1_RSTD: case ACT_LN2_MEAN:
    case ACT_LN2_RSTD: case ACT_LOSS:
        return sizeof(float);
    case ACT_PROBS: case ACT_D_SCRATCH:
        /* floats in every type (ops.def): the probabilities, or what an
         * attention saving the lse keeps (backend_attention_saved_floats) */
        return sizeof(float);
    default: break;
    }
    return abytes ? abytes : sizeof(float);
}

act_scope act_scope_of(act_id i)
{
    if (i <= ACT_EMB_RSTD) return ACT_SCOPE_EMB;
    if (i == ACT_X) return ACT_SCOPE_BOUNDARY;
    if (i <= ACT_LN2_RSTD) return ACT_SCOPE_LAYER;
    if (i <= ACT_LOSS) return ACT_SCOPE_HEAD;
    if (i <= ACT_D_SCRATCH) return ACT_SCOPE_WORK;
    return i == ACT_D_OUT ? ACT_SCOPE_FROM_NEXT : ACT_SCOPE_TO_PREV;
}

size_t act_rows(int B, int T, int64_t max_tokens)
{
    return max_tokens > 0 ? (size_t)max_tokens : sat_mul((size_t)B, (size_t)T);
}

size_t act_att(const bert_config *cfg, int B, int T, int64_t max_tokens)
{
    return sat_mul(sat_mul(act_rows(B, T, max_tokens), (size_t)cfg->num_attention_heads), (size_t)T);
}

act_strides act_strides_for(const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse, size_t abytes)
{
    size_t N = act_rows(B, T, max_tokens), e = act_elem_bytes(ACT_X, abytes);
    act_strides s;
    s.nc = round64(sat_mul(N, (size_t)cfg->hidden_size), e);
    s.ni = round64(sat_mul(N, (size_t)cfg->intermediate_size), e);
    s.n1 = round64(N, act_elem_bytes(ACT_LN1_MEAN, abytes));
    int NH = cfg->num_attention_heads;
    s.att = round64(att_lse ? backend_attention_saved_floats(1, N, T, NH, cfg->hidden_size / NH)
                            : act_att(cfg, B, T, max_tokens),
                    act_elem_bytes(ACT_PROBS, abytes));
    /* the score gradient: the probabilities' size (floats both, act_elem_bytes) */
    s.scr = att_lse ? 0 : s.att;
    return s;
}

void act_units(size_t unit[ACT_COUNT], const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse,
               size_t abytes)
{
    act_strides s = act_strides_for(cfg, B, T, max_tokens, att_lse, abytes);
    /* (N, 2): start, end */
    size_t head = round64(sat_mul(act_rows(B, T, max_tokens), 2), act_elem_bytes(ACT_LOGITS, abytes));
    for (int i = 0; i < ACT_COUNT; i++) unit[i] = s.nc; /* (N, C): most of them */
    unit[ACT_EMB_MEAN] = unit[ACT_EMB_RSTD] = s.n1;
    unit[ACT_PROBS] = s.att;
    unit[ACT_LN1_MEAN] = unit[ACT_LN1_RSTD] = unit[ACT_LN2_MEAN] = unit[ACT_LN2_RSTD] = s.n1;
    unit[ACT_FFN_PRE] = unit[ACT_FFN_ACT] = s.ni;
    unit[ACT_LOGITS] = unit[ACT_DLOGITS] = head;
    unit[ACT_LOSS] = round64(1, act_elem_bytes(ACT_LOSS, abytes));
    unit[ACT_D_FFN_ACT] = unit[ACT_D_FFN_PRE] = s.ni;
    unit[ACT_D_SCRATCH] = s.scr;
}

/* How many of a tensor of scope sc a stage of layers [lo, hi) holds. */
static size_t scope_count(act_scope sc, int first, int last, int lo, int hi, int recompute)
{
    switch (sc) {
    case ACT_SCOPE_EMB: return (size_t)first;
    case ACT_SCOPE_BOUNDARY: return (size_t)(hi - lo) + 1;
    case ACT_SCOPE_LAYER: return recompute ? 1 : (size_t)(hi - lo);
    case ACT_SCOPE_HEAD: return (size_t)last;
    case ACT_SCOPE_WORK: return 1;
    case ACT_SCOPE_FROM_NEXT: return (size_t)!last;
    default: return (size_t)!first; /* ACT_SCOPE_TO_PREV */
    }
}

void act_sizes(size_t sizes[ACT_COUNT], const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse,
               size_t abytes, int recompute, int lo, int hi)
{
    size_t unit[ACT_COUNT];
    act_units(unit, cfg, B, T, max_tokens, att_lse, abytes);
    int first = lo == 0, last = hi == cfg->num_hidden_layers;
    for (int i = 0; i < ACT_COUNT; i++)
        sizes[i] = sat_mul(scope_count(act_scope_of((act_id)i), first, last, lo, hi, recompute), unit[i]);
}

int act_per_set(act_id i, int recompute)
{
    act_scope sc = act_scope_of(i);
    if (sc == ACT_SCOPE_LAYER) return !recompute;
    return sc != ACT_SCOPE_WORK;
}

size_t act_total(const bert_config *cfg, int B, int T, int64_t max_tokens, int att_lse, size_t abytes, int recompute,
                 int lo, int hi, int sets)
{
    size_t sizes[ACT_COUNT], total = 0;
    act_sizes(sizes, cfg, B, T, max_tokens, att_lse, abytes, recompute, lo, hi);
    for (int i = 0; i < ACT_COUNT; i++)
        total = sat_add(total, sat_mul(sizes[i], act_per_set((act_id)i, recompute) ? (size_t)sets : 1));
    return total;
}

size_t act_int_count(int B, size_t rows)
{
    return sat_add(sat_add(sat_mul(4, rows), sat_mul(3, (size_t)B)), 1);
}
