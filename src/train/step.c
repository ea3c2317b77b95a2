/* The forward and backward passes of one optimizer step (step.h). */
#include "train/step.h"

#include "core/clock.h"
#include "core/err.h"
#include "model/pack.h"

#include <stdio.h>
#include <stdlib.h>

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

/* --packing varlen: the micro-batch's B windows (gathered padded in o->mb)
 * packed, real tokens only, and run in pieces of at most the model's
 * tokens (step.h: their dropout streams and weights). */
static int run_packed(const train_step_opts *o, int B, int count, philox_stream rng, int last, double t0,
                      double *loss)
{
    const loader_batch *mb = o->mb;
    int T = mb->T;
    int64_t cap = bert_model_max_tokens(o->model);
    int32_t *ids = malloc((size_t)B * T * sizeof *ids), *types = malloc((size_t)B * T * sizeof *types);
    int32_t *cu = malloc(((size_t)B + 1) * sizeof *cu);
    int *len = malloc((size_t)B * sizeof *len);
    int rc = 0;
    if (!ids || !types || !cu || !len) rc = err_set(ERR_RUNTIME, "packing a micro-batch of %d windows: out of memory", B);
    else pack_lengths(mb->attention_mask, T, NULL, B, len);
    for (int r0 = 0, piece = 0, n; !rc && r0 < B; piece++, r0 += n) {
        n = pack_cut(len + r0, B - r0, 0, cap, NULL);
        size_t at = (size_t)r0 * T;
        pack_piece(mb->input_ids + at, mb->token_type_ids + at, NULL, T, NULL, len + r0, n, ids, types, cu);
        bert_batch b = {n, T, ids, types, NULL, mb->start_positions + r0, mb->end_positions + r0, cu, 0};
        philox_stream r = rng;
        r.seed += (uint64_t)piece;
        float l = 0;
        float w = (float)n / (float)count;
        rc = forward_backward(o, &b, r, w * o->scale, last && r0 + n == B, t0, &l);
        if (!rc) *loss += (double)w * (double)l;
        if (o->timing) t0 = clock_now_s();
    }
    free(ids);
    free(types);
    free(cu);
    free(len);
    return rc;
}

int train_step_grads(const train_step_opts *o, const int32_t *idx, int first, int len, int count, double *loss_out)
{
    bert_zero_grad(o->model);
    double loss = 0;
    int k0 = first / o->micro;
    idx += first;
    for (int k = k0, at = 0; at < len; k++, at += o->micro) {
        double t0 = o->timing ? clock_now_s() : 0;
        int B = len - at < o->micro ? len - at : o->micro;
        loader_gather(o->mb, o->f, idx + at, B);
        philox_stream rng = {o->seed, (uint32_t)((uint64_t)o->step * (uint64_t)o->micro_batches + (uint64_t)k), 0};
        int last = at + B >= len;
        int rc = train_step_debug_oom(o->step + 1, B);
        if (!rc && o->packing == PACKING_VARLEN) rc = run_packed(o, B, count, rng, last, t0, &loss);
        else if (!rc) {
            const loader_batch *mb = o->mb;
            bert_batch b = {B, mb->T, mb->input_ids, mb->token_type_ids, mb->attention_mask, mb->start_positions,
                            mb->end_positions, NULL, 0};
            float l = 0;
            float w = (float)B / (float)count;
            rc = forward_backward(o, &b, rng, w * o->scale, last, t0, &l);
            if (!rc) loss += (double)w * (double)l;
        }
        if (rc) return rc;
    }
    *loss_out = loss;
    return 0;
}
