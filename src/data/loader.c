#include "data/loader.h"

#include "core/err.h"
#include "core/philox.h"
#include "core/sat.h"

#include <stdlib.h>
#include <string.h>

/* Counter word that keeps the shuffle's draws apart from dropout's streams
 * even though both use the run's seed as the Philox key. */
#define SHUFFLE_DOMAIN 0x53485546u /* "SHUF" */

void loader_epoch_order(uint64_t seed, int64_t epoch, int shuffle, int32_t *order, int n)
{
    for (int i = 0; i < n; i++) order[i] = i;
    if (!shuffle) return;
    /* Fisher-Yates; draw i is a pure function of (seed, epoch, i). */
    for (int i = n - 1; i > 0; i--) {
        philox_u32x4 r = philox4x32((uint32_t)i, (uint32_t)epoch, (uint32_t)((uint64_t)epoch >> 32), SHUFFLE_DOMAIN,
                                    (uint32_t)seed, (uint32_t)(seed >> 32));
        uint64_t u = ((uint64_t)r.v[0] << 32) | r.v[1];
        int j = (int)(u % (uint64_t)(i + 1));
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

int loader_init(loader *l, int n, int batch, int shuffle, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    if (n <= 0) return err_set(ERR_INPUT, "loader: no training features");
    if (batch <= 0) return err_set(ERR_INPUT, "loader: batch %d must be positive", batch);
    l->order = malloc((size_t)n * sizeof *l->order);
    if (!l->order) return err_set(ERR_RUNTIME, "loader: out of memory for %d features", n);
    l->n = n;
    l->batch = batch;
    l->shuffle = shuffle;
    l->seed = seed;
    l->order_epoch = -1;
    return 0;
}

void loader_free(loader *l)
{
    free(l->order);
    memset(l, 0, sizeof *l);
}

int64_t loader_steps_per_epoch(const loader *l) { return ((int64_t)l->n + l->batch - 1) / l->batch; }

int loader_seek(loader *l, int64_t epoch, int64_t cursor)
{
    if (epoch < 0 || cursor < 0 || cursor >= l->n || cursor % l->batch != 0)
        return err_set(ERR_INPUT, "loader: position epoch %lld, feature %lld is not a step boundary of %d features in batches of %d",
                       (long long)epoch, (long long)cursor, l->n, l->batch);
    l->epoch = epoch;
    l->cursor = cursor;
    return 0;
}

void loader_next(loader *l, int32_t *idx, int *count, int64_t *epoch)
{
    if (l->order_epoch != l->epoch) {
        loader_epoch_order(l->seed, l->epoch, l->shuffle, l->order, l->n);
        l->order_epoch = l->epoch;
    }
    int64_t left = l->n - l->cursor;
    int c = left < l->batch ? (int)left : l->batch;
    memcpy(idx, l->order + l->cursor, (size_t)c * sizeof *idx);
    *count = c;
    *epoch = l->epoch;
    l->cursor += c;
    if (l->cursor >= l->n) {
        l->epoch++;
        l->cursor = 0;
    }
}

int loader_batch_init(loader_batch *b, int cap, int T)
{
    memset(b, 0, sizeof *b);
    /* one block: ids, types, mask (cap x T each), then start and end (cap each) */
    size_t nt = sat_mul((size_t)cap, (size_t)T);
    int32_t *block = malloc(sat_mul(sat_add(sat_mul(nt, 3), sat_mul(2, (size_t)cap)), sizeof *block));
    if (!block) return err_set(ERR_RUNTIME, "loader: out of memory for a batch of %d x %d", cap, T);
    b->input_ids = block;
    b->token_type_ids = block + nt;
    b->attention_mask = block + 2 * nt;
    b->start_positions = block + 3 * nt;
    b->end_positions = b->start_positions + cap;
    b->cap = cap;
    b->T = T;
    return 0;
}

void loader_batch_free(loader_batch *b)
{
    free(b->input_ids); /* the block */
    memset(b, 0, sizeof *b);
}

void loader_gather(loader_batch *b, const features *f, const int32_t *idx, int B)
{
    int T = b->T;
    for (int r = 0; r < B; r++) {
        size_t src = (size_t)idx[r] * (size_t)T, dst = (size_t)r * (size_t)T;
        memcpy(b->input_ids + dst, f->input_ids + src, (size_t)T * sizeof(int32_t));
        memcpy(b->token_type_ids + dst, f->token_type_ids + src, (size_t)T * sizeof(int32_t));
        memcpy(b->attention_mask + dst, f->attention_mask + src, (size_t)T * sizeof(int32_t));
        b->start_positions[r] = f->start_positions ? f->start_positions[idx[r]] : 0;
        b->end_positions[r] = f->end_positions ? f->end_positions[idx[r]] : 0;
    }
    b->B = B;
}
