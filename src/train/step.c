/* The forward and backward passes of one optimizer step (step.h). */
#include "train/step.h"

#include "core/clock.h"
#include "core/err.h"
#include "model/pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* BERTC_DEBUG_OOM=N or N@S (step.h): step is 1-based. */
int train_step_debug_oom(int64_t step, int rows)
{
    const char *s = getenv("BERTC_DEBUG_OOM");
    long long n, from = 1;
    if (!s || sscanf(s, "%lld@%lld", &n, &from) < 1) return 0;
    if (step < from || rows <= n) return 0;
    return err_set(ERR_RUNTIME, "debug: out of memory (BERTC_DEBUG_OOM=%s, a micro-batch of %d rows)", s, rows);
}

/* The hook on for the backward that ends the rows (last = 1). */
static void arm_buckets(const train_step_opts *o, int last)
{
    if (o->ready && last) bert_model_set_grads_ready(o->model, o->ready, o->ready_arg);
}

/* Forward of b, then backward with grad_scale; times both when asked. */
static int forward_backward(const train_step_opts *o, const bert_batch *b, philox_stream rng, float grad_scale,
                            int last, double t0, float *loss)
{
    int rc = bert_forward(o->model, b, o->drop_hidden, o->drop_attn, rng, loss, NULL, NULL);
    double t1 = o->timing ? clock_now_s() : 0;
    arm_buckets(o, last);
    if (!rc) rc = bert_backward(o->model, grad_scale);
    bert_model_set_grads_ready(o->model, NULL, NULL);
    if (o->timing) {
        o->timing->forward_s += t1 - t0;
        o->timing->backward_s += clock_now_s() - t1;
    }
    return rc;
}

static int add_unit(train_units *us, train_unit u)
{
    if (us->n == us->cap) {
        int cap = us->cap ? 2 * us->cap : 16;
        train_unit *v = realloc(us->u, (size_t)cap * sizeof *v);
        if (!v) return err_set(ERR_RUNTIME, "out of memory");
        us->u = v;
        us->cap = cap;
    }
    us->u[us->n++] = u;
    return 0;
}

/* The packing buffers for micro-batches of micro windows of T tokens: ids,
 * types and cu in one block. */
static int pack_buffers(train_units *us, int micro, int T)
{
    if (us->micro >= micro) return 0;
    size_t rows = (size_t)micro * (size_t)T;
    int32_t *block = realloc(us->ids, (2 * rows + (size_t)micro + 1) * sizeof *block);
    if (block) us->ids = block;
    int *len = realloc(us->len, (size_t)micro * sizeof *len);
    if (len) us->len = len;
    if (!block || !len) return err_set(ERR_RUNTIME, "packing a micro-batch of %d windows: out of memory", micro);
    us->types = us->ids + rows;
    us->cu = us->ids + 2 * rows;
    us->micro = micro;
    return 0;
}

int train_units_plan(train_units *us, const features *f, packing_kind packing, const int32_t *idx, int first, int len,
                     int micro, int64_t max_tokens)
{
    us->n = 0;
    int rc = packing == PACKING_VARLEN ? pack_buffers(us, micro, f->T) : 0;
    for (int at = first; at < first + len && !rc; at += micro) {
        int B = first + len - at < micro ? first + len - at : micro;
        int k = at / micro;
        if (packing != PACKING_VARLEN) {
            rc = add_unit(us, (train_unit){k, at, B, 0, B * f->T, B});
            continue;
        }
        pack_lengths(f->attention_mask, f->T, idx + at, B, us->len);
        for (int r0 = 0, piece = 0, n; r0 < B && !rc; piece++, r0 += n) {
            int64_t N;
            n = pack_cut(us->len + r0, B - r0, 0, max_tokens, &N);
            rc = add_unit(us, (train_unit){k, at + r0, n, piece, (int)N, B});
        }
    }
    return rc;
}

void train_units_batch(train_units *us, int i, loader_batch *mb, const features *f, const int32_t *idx,
                       packing_kind packing, bert_batch *b)
{
    const train_unit *u = &us->u[i];
    int T = f->T;
    loader_gather(mb, f, idx + u->r0, u->n);
    if (packing != PACKING_VARLEN) {
        *b = (bert_batch){u->n, T, mb->input_ids, mb->token_type_ids, mb->attention_mask, mb->start_positions,
                          mb->end_positions, NULL, 0};
        return;
    }
    pack_piece(mb->input_ids, mb->token_type_ids, mb->attention_mask, T, NULL, NULL, u->n, us->ids, us->types, us->cu);
    *b = (bert_batch){u->n, T, us->ids, us->types, NULL, mb->start_positions, mb->end_positions, us->cu, 0};
}

philox_stream train_unit_stream(const train_unit *u, uint64_t seed, int64_t step, int micro_batches)
{
    return (philox_stream){seed + (uint64_t)u->piece, (uint32_t)((uint64_t)step * (uint64_t)micro_batches + (uint64_t)u->k),
                           0};
}

void train_units_free(train_units *us)
{
    free(us->u);
    free(us->ids); /* and types and cu */
    free(us->len);
    memset(us, 0, sizeof *us);
}

int train_step_grads(const train_step_opts *o, const int32_t *idx, int first, int len, int count, double *loss_out)
{
    bert_zero_grad(o->model);
    train_units us = {0};
    double loss = 0;
    int rc = train_units_plan(&us, o->f, o->packing, idx, first, len, o->micro, bert_model_max_tokens(o->model));
    for (int i = 0; i < us.n && !rc; i++) {
        const train_unit *u = &us.u[i];
        double t0 = o->timing ? clock_now_s() : 0;
        if (u->piece == 0) rc = train_step_debug_oom(o->step + 1, u->B);
        if (rc) break;
        bert_batch b;
        train_units_batch(&us, i, o->mb, o->f, idx, o->packing, &b);
        float l = 0, w = (float)u->n / (float)count;
        rc = forward_backward(o, &b, train_unit_stream(u, o->seed, o->step, o->micro_batches), w * o->scale,
                              i == us.n - 1, t0, &l);
        if (!rc) loss += (double)w * (double)l;
    }
    train_units_free(&us);
    if (!rc) *loss_out = loss;
    return rc;
}
