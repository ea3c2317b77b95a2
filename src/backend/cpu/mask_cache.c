/* The dropout masks of recent forwards (attention's and hidden dropout's),
 * kept as keep bits (1 bit per element, 1/32 of the masked tensor's memory)
 * so that the backward, and a recomputed forward, read the mask instead of
 * drawing it again from Philox.
 *
 * A mask is a pure function of its key (stream, p, the padded layout) and
 * the window lengths, which a slot stores in full and a lookup compares in
 * full, so a hit gives exactly the bits a draw would: results do not depend
 * on what is cached, nor on the order of forwards and backwards (recompute,
 * micro-batches). Memory is bounded by CPU_MASK_BUDGET: a claim that does
 * not fit evicts the oldest masks, and a mask larger than the budget is not
 * cached (its backward draws it again). A backward drops the mask it used,
 * keeping the memory for the next forward's claim. */
#include "backend/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

void cpu_mask_key_init(cpu_mask_key *key, philox_stream rng, float p, const backend_windows *w, int NH, int C)
{
    memset(key, 0, sizeof *key);
    key->seed = rng.seed;
    key->step = rng.step;
    key->stream = rng.stream;
    memcpy(&key->p_bits, &p, sizeof key->p_bits);
    key->NH = NH;
    key->T = w->T;
    key->B = w->B;
    key->C = C;
}

static int same_key(const cpu_mask_slot *s, const cpu_mask_key *key, const int32_t *lens, size_t words)
{
    return s->words == words && !memcmp(&s->key, key, sizeof *key) &&
           !memcmp(s->lens, lens, (size_t)key->B * sizeof *lens);
}

int cpu_mask_find(cpu_ctx *ctx, const cpu_mask_key *key, const int32_t *lens, size_t words)
{
    for (int i = 0; i < CPU_MASK_SLOTS; i++) {
        const cpu_mask_slot *s = &ctx->masks[i];
        if (s->state == CPU_MASK_VALID && same_key(s, key, lens, words)) return i;
    }
    return -1;
}

static void release_slot(cpu_ctx *ctx, cpu_mask_slot *s)
{
    free(s->bits);
    ctx->mask_words -= s->cap;
    s->bits = NULL;
    s->cap = 0;
    s->state = CPU_MASK_EMPTY;
}

/* The slot to fill: an empty one with room (the smallest), else an empty
 * one, else the oldest valid mask's; -1 when all are being filled. */
static int pick_slot(cpu_ctx *ctx, size_t words)
{
    int best = -1, empty = -1, oldest = -1;
    for (int i = 0; i < CPU_MASK_SLOTS; i++) {
        const cpu_mask_slot *s = &ctx->masks[i];
        if (s->state == CPU_MASK_EMPTY) {
            if (s->cap >= words && (best < 0 || s->cap < ctx->masks[best].cap)) best = i;
            if (empty < 0) empty = i;
        } else if (s->state == CPU_MASK_VALID && (oldest < 0 || s->age < ctx->masks[oldest].age)) {
            oldest = i;
        }
    }
    return best >= 0 ? best : empty >= 0 ? empty : oldest;
}

/* Frees memory of slots other than keep until `need` more words fit: empty
 * slots' first, then the oldest valid masks. 0, or -1 when it cannot. */
static int make_room(cpu_ctx *ctx, int keep, size_t need)
{
    const size_t budget = CPU_MASK_BUDGET / sizeof(uint64_t);
    while (ctx->mask_words + need > budget) {
        int victim = -1;
        for (int i = 0; i < CPU_MASK_SLOTS && victim < 0; i++)
            if (i != keep && ctx->masks[i].state == CPU_MASK_EMPTY && ctx->masks[i].cap) victim = i;
        for (int i = 0; i < CPU_MASK_SLOTS && victim < 0; i++) {
            const cpu_mask_slot *s = &ctx->masks[i];
            if (i != keep && s->state == CPU_MASK_VALID && s->cap) {
                for (int j = i + 1; j < CPU_MASK_SLOTS; j++) {
                    const cpu_mask_slot *t = &ctx->masks[j];
                    if (j != keep && t->state == CPU_MASK_VALID && t->cap && t->age < s->age) s = t;
                }
                victim = (int)(s - ctx->masks);
            }
        }
        if (victim < 0) return -1;
        release_slot(ctx, &ctx->masks[victim]);
    }
    return 0;
}

int cpu_mask_claim(cpu_ctx *ctx, const cpu_mask_key *key, const int32_t *lens, size_t words)
{
    if (words == 0 || words > CPU_MASK_BUDGET / sizeof(uint64_t) || key->B <= 0) return -1;
    int i = pick_slot(ctx, words);
    if (i < 0) return -1;
    cpu_mask_slot *s = &ctx->masks[i];
    s->state = CPU_MASK_FILLING;
    if (s->cap < words) {
        release_slot(ctx, s);
        s->state = CPU_MASK_FILLING;
        if (make_room(ctx, i, words) != 0 || !(s->bits = malloc(words * sizeof *s->bits))) {
            s->state = CPU_MASK_EMPTY;
            return -1;
        }
        s->cap = words;
        ctx->mask_words += words;
    }
    int32_t *l = realloc(s->lens, (size_t)key->B * sizeof *l);
    if (!l) {
        s->state = CPU_MASK_EMPTY;
        return -1;
    }
    memcpy(l, lens, (size_t)key->B * sizeof *l);
    s->lens = l;
    memcpy(&s->key, key, sizeof *key);
    s->words = words;
    s->age = ++ctx->mask_clock;
    return i;
}

void cpu_mask_publish(cpu_ctx *ctx, int slot)
{
    if (slot >= 0 && ctx->masks[slot].state == CPU_MASK_FILLING) ctx->masks[slot].state = CPU_MASK_VALID;
}

void cpu_mask_drop(cpu_ctx *ctx, int slot)
{
    if (slot >= 0) ctx->masks[slot].state = CPU_MASK_EMPTY;
}

void cpu_mask_cache_free(cpu_ctx *ctx)
{
    for (int i = 0; i < CPU_MASK_SLOTS; i++) {
        release_slot(ctx, &ctx->masks[i]);
        free(ctx->masks[i].lens);
        ctx->masks[i].lens = NULL;
    }
}
