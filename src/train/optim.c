/* AdamW, the linear warm-up schedule and gradient clipping (optim.h). The
 * arithmetic on tensors is the backend's (sum_squares, adamw); this file
 * decides the learning rate, the clipping factor and whether to step. */
#include "train/optim.h"

#include "core/alloc.h"
#include "core/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct optim {
    backend *be;
    const param_table *table;
    /* The ranges of the block this optimizer updates, in order: the whole
     * block, or this rank's pieces (optim_create_pieces); m and v hold
     * `owned` floats each, the ranges' packed in that order. */
    int nseg;
    size_t *seg_off, *seg_len;
    size_t owned;
    float *m, *v; /* backend memory */
    int64_t t, skipped;
    /* adamw_multi's ranges: each tensor's part of each range, in order */
    backend_adamw_range *mt;
    int nmt;
};

double optim_lr_lambda(int64_t k, int64_t warmup, int64_t total)
{
    if (k < warmup) return (double)k / (double)(warmup > 1 ? warmup : 1);
    int64_t span = total - warmup;
    double f = (double)(total - k) / (double)(span > 1 ? span : 1);
    return f > 0 ? f : 0.0;
}

int64_t optim_warmup_steps(double warmup, int64_t total)
{
    if (!(warmup >= 0)) return 0;
    if (warmup >= 1) return (int64_t)warmup;
    return (int64_t)ceil((double)total * warmup);
}

double optim_clip_coef(double norm, double max_norm)
{
    if (max_norm <= 0) return 1.0;
    /* clip_grad_norm_ computes this in fp32; the double here differs in the
     * last bits at most, far below the tolerance of any comparison. */
    double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}

optim_config optim_config_default(void)
{
    optim_config c = {
        .lr = 3e-5,
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-8,
        .weight_decay = 0.01,
        .max_grad_norm = 1.0,
        .warmup_steps = 0,
        .total_steps = 0,
    };
    return c;
}

/* The ranges adamw_multi takes: the parts of the tensors inside each of
 * this optimizer's ranges, with their state's place in m and v. */
static void make_ranges(optim *o)
{
    const param_table *t = o->table;
    o->mt = xmalloc(((size_t)t->n + (size_t)o->nseg) * sizeof *o->mt);
    size_t at = 0;
    for (int s = 0; s < o->nseg; s++) {
        size_t off = o->seg_off[s], end = off + o->seg_len[s];
        for (int i = 0; i < t->n; i++) {
            size_t r0 = t->info[i].offset, r1 = r0 + t->info[i].numel;
            size_t a = r0 > off ? r0 : off, b = r1 < end ? r1 : end;
            if (a >= b) continue;
            o->mt[o->nmt++] = (backend_adamw_range){a, b - a, at + (a - off), t->info[i].decay};
        }
        at += o->seg_len[s];
    }
}

int optim_create(optim **out, backend *be, const param_table *t)
{
    size_t off = 0, len = t->total;
    return optim_create_pieces(out, be, t, &off, &len, 1);
}

int optim_start(optim **out, backend *be, const param_table *t, const float *m, const float *v, int64_t steps,
                int64_t skipped)
{
    int rc = optim_create(out, be, t);
    if (!rc && m) rc = optim_set_state(*out, m, v, steps, skipped);
    return rc;
}

int optim_create_pieces(optim **out, backend *be, const param_table *t, const size_t *off, const size_t *len,
                        int nseg)
{
    *out = NULL;
    if (nseg < 1) return err_set(ERR_INPUT, "optim_create_pieces: %d ranges", nseg);
    size_t owned = 0;
    for (int i = 0; i < nseg; i++) {
        if (off[i] > t->total || len[i] > t->total - off[i])
            return err_set(ERR_INPUT, "optim_create_pieces: range %d [%zu, +%zu) outside the %zu parameters", i,
                           off[i], len[i], t->total);
        owned += len[i];
    }
    optim *o = xcalloc(1, sizeof *o);
    o->be = be;
    o->table = t;
    o->nseg = nseg;
    o->seg_off = xmalloc((size_t)nseg * sizeof *o->seg_off);
    o->seg_len = xmalloc((size_t)nseg * sizeof *o->seg_len);
    memcpy(o->seg_off, off, (size_t)nseg * sizeof *off);
    memcpy(o->seg_len, len, (size_t)nseg * sizeof *len);
    o->owned = owned;
    /* one float at least: a rank may own nothing of a tiny model */
    size_t bytes = mul_size(owned ? owned : 1, sizeof(float));
    o->m = be->i->alloc(be->ctx, bytes);
    if (o->m) o->v = be->i->alloc(be->ctx, bytes);
    if (!o->m || !o->v) {
        int rc = err_wrap(ERR_RUNTIME, "optim_create: Adam state for %zu parameters", owned);
        optim_free(o);
        return rc;
    }
    be->i->zero(be->ctx, o->m, bytes);
    be->i->zero(be->ctx, o->v, bytes);
    if (be->i->adamw_multi) make_ranges(o);
    *out = o;
    return 0;
}

void optim_free(optim *o)
{
    if (!o) return;
    if (o->m) o->be->i->release(o->be->ctx, o->m);
    if (o->v) o->be->i->release(o->be->ctx, o->v);
    free(o->seg_off);
    free(o->seg_len);
    free(o->mt);
    free(o);
}

int64_t optim_t(const optim *o) { return o->t; }
int64_t optim_skipped(const optim *o) { return o->skipped; }
size_t optim_state_floats(const optim *o) { return o->owned; }

static int check_config(const optim_config *c)
{
    if (!(c->lr >= 0) || !isfinite(c->lr)) return err_set(ERR_INPUT, "optim: learning rate %g", c->lr);
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return err_set(ERR_INPUT, "optim: betas %g, %g must be in [0, 1)", c->beta1, c->beta2);
    if (!(c->eps > 0)) return err_set(ERR_INPUT, "optim: eps %g must be positive", c->eps);
    if (!(c->weight_decay >= 0)) return err_set(ERR_INPUT, "optim: weight decay %g", c->weight_decay);
    if (c->warmup_steps < 0 || c->total_steps < 0)
        return err_set(ERR_INPUT, "optim: warm-up %lld and total %lld steps must not be negative",
                       (long long)c->warmup_steps, (long long)c->total_steps);
    return 0;
}

double optim_sum_squares(optim *o, const float *grads)
{
    double s = 0;
    for (int i = 0; i < o->nseg; i++)
        if (o->seg_len[i]) s += o->be->i->sum_squares(o->be->ctx, grads + o->seg_off[i], o->seg_len[i]);
    return s;
}

/* AdamW on the parameters [off, off + len) (inside one of the ranges),
 * whose state is at m + at, v + at: in runs of neighbouring tensors with the
 * same decay, one call each. */
static void adamw_range(optim *o, float *params, const float *grads, size_t off, size_t len, size_t at,
                        const optim_config *c, float lr, float gs)
{
    const param_table *t = o->table;
    size_t end = off + len;
    for (int i = 0; i < t->n && off < end;) {
        int j = i + 1;
        while (j < t->n && t->info[j].decay == t->info[i].decay) j++;
        size_t r0 = t->info[i].offset, r1 = t->info[j - 1].offset + t->info[j - 1].numel;
        size_t a = r0 > off ? r0 : off, b = r1 < end ? r1 : end;
        if (a < b) {
            float wd = t->info[i].decay ? (float)c->weight_decay : 0.0f;
            o->be->i->adamw(o->be->ctx, params + a, grads + a, o->m + at + (a - off), o->v + at + (a - off), b - a, lr,
                            (float)c->beta1, (float)c->beta2, (float)c->eps, wd, o->t, gs);
        }
        i = j;
    }
}

/* The step through the backend's adamw_multi: the norm (the sum of
 * squares on the device unless sum_given), the clip, the overflow check
 * and AdamW over every range, one pass. */
static int apply_multi(optim *o, float *params, const float *grads, const optim_config *c, int64_t k,
                       float grad_unscale, int sum_given, double sum_squares, optim_result *r)
{
    optim_result res = {0};
    res.lr = c->lr * optim_lr_lambda(k, c->warmup_steps, c->total_steps);
    backend_adamw_args a = {
        .lr = (float)res.lr,
        .b1 = (float)c->beta1,
        .b2 = (float)c->beta2,
        .eps = (float)c->eps,
        .wd = (float)c->weight_decay,
        .t = o->t + 1,
        .grad_unscale = grad_unscale,
        .max_norm = c->max_grad_norm,
        .sum_given = sum_given,
        .sum_squares = sum_squares,
    };
    backend_adamw_result br;
    int rc = o->be->i->adamw_multi(o->be->ctx, &br, params, grads, o->m, o->v, o->mt, o->nmt, &a);
    if (!rc) rc = o->be->i->sync(o->be->ctx);
    if (rc) return err_wrap(rc, "optim_step");
    res.grad_norm = br.norm;
    res.clip_coef = br.clip_coef;
    res.skipped = br.skipped;
    if (br.skipped) o->skipped++;
    else o->t++;
    if (r) *r = res;
    return 0;
}

int optim_step(optim *o, float *params, const float *grads, const optim_config *c, int64_t k, float grad_unscale,
               optim_result *r)
{
    /* one range: the backend's norm is sum_squares's over it, the same bits */
    if (o->be->i->adamw_multi && o->nseg == 1) {
        int rc = check_config(c);
        return rc ? rc : apply_multi(o, params, grads, c, k, grad_unscale, 0, 0.0, r);
    }
    return optim_apply(o, params, grads, c, k, grad_unscale, optim_sum_squares(o, grads), r);
}

int optim_apply(optim *o, float *params, const float *grads, const optim_config *c, int64_t k, float grad_unscale,
                double sum_squares, optim_result *r)
{
    int rc = check_config(c);
    if (rc) return rc;
    if (o->be->i->adamw_multi) return apply_multi(o, params, grads, c, k, grad_unscale, 1, sum_squares, r);
    optim_result res = {0};

    double norm = sqrt(sum_squares) * fabs((double)grad_unscale);
    res.grad_norm = norm;
    res.lr = c->lr * optim_lr_lambda(k, c->warmup_steps, c->total_steps);
    /* The sum of squares of finite floats cannot overflow a double, so a
     * non-finite norm means a NaN or an infinity among the gradients. */
    if (!isfinite(norm)) {
        res.skipped = 1;
        res.clip_coef = 1;
        o->skipped++;
        if (r) *r = res;
        return 0;
    }
    res.clip_coef = optim_clip_coef(norm, c->max_grad_norm);
    float gs = (float)((double)grad_unscale * res.clip_coef);
    o->t++;
    size_t at = 0;
    for (int i = 0; i < o->nseg; i++) {
        adamw_range(o, params, grads, o->seg_off[i], o->seg_len[i], at, c, (float)res.lr, gs);
        at += o->seg_len[i];
    }
    if ((rc = o->be->i->sync(o->be->ctx))) return err_wrap(rc, "optim_step");
    if (r) *r = res;
    return 0;
}

int optim_get_state(optim *o, float *m, float *v, int64_t *t, int64_t *skipped)
{
    size_t bytes = o->owned * sizeof(float);
    int rc = bytes ? o->be->i->download(o->be->ctx, m, o->m, bytes) : 0;
    if (!rc && bytes) rc = o->be->i->download(o->be->ctx, v, o->v, bytes);
    if (rc) return err_wrap(rc, "optim_get_state");
    if (t) *t = o->t;
    if (skipped) *skipped = o->skipped;
    return 0;
}

void optim_state_memory(optim *o, const float **m, const float **v)
{
    *m = o->m;
    *v = o->v;
}

static int check_counts(int64_t t, int64_t skipped)
{
    if (t < 0 || skipped < 0)
        return err_set(ERR_INPUT, "optim_set_state: step %lld, skipped %lld must not be negative", (long long)t,
                       (long long)skipped);
    return 0;
}

int optim_set_state(optim *o, const float *m, const float *v, int64_t t, int64_t skipped)
{
    int rc = check_counts(t, skipped);
    if (rc) return rc;
    size_t bytes = o->owned * sizeof(float);
    rc = bytes ? o->be->i->upload(o->be->ctx, o->m, m, bytes) : 0;
    if (!rc && bytes) rc = o->be->i->upload(o->be->ctx, o->v, v, bytes);
    if (rc) return err_wrap(rc, "optim_set_state");
    o->t = t;
    o->skipped = skipped;
    return 0;
}

int optim_set_state_block(optim *o, const float *m, const float *v, int64_t t, int64_t skipped)
{
    int rc = check_counts(t, skipped);
    if (rc) return rc;
    size_t at = 0;
    for (int i = 0; i < o->nseg && !rc; i++) {
        size_t bytes = o->seg_len[i] * sizeof(float);
        if (!bytes) continue;
        rc = o->be->i->upload(o->be->ctx, o->m + at, m + o->seg_off[i], bytes);
        if (!rc) rc = o->be->i->upload(o->be->ctx, o->v + at, v + o->seg_off[i], bytes);
        at += o->seg_len[i];
    }
    if (rc) return err_wrap(rc, "optim_set_state_block");
    o->t = t;
    o->skipped = skipped;
    return 0;
}
