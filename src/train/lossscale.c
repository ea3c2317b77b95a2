/* Dynamic loss scaling (lossscale.h): torch's _amp_update_scale_ as a
 * state machine on the host. The scale is a float, as torch keeps it, so
 * halving and doubling are exact and a checkpoint restores it exactly. */
#include "train/lossscale.h"

#include "core/err.h"

#include <math.h>
#include <string.h>

void lossscale_init(loss_scaler *s, int enabled)
{
    memset(s, 0, sizeof *s);
    s->enabled = enabled != 0;
    s->scale = s->enabled ? LOSSSCALE_INIT : 1.0f;
}

float lossscale_scale(const loss_scaler *s)
{
    return s->scale;
}

float lossscale_unscale(const loss_scaler *s)
{
    /* torch computes the inverse in fp32 too; a power of two stays exact. */
    return 1.0f / s->scale;
}

int lossscale_update(loss_scaler *s, int found_inf)
{
    if (found_inf) {
        s->skipped++;
        s->skipped_in_row++;
        if (!s->enabled) return 0;
        s->scale = s->scale * LOSSSCALE_BACKOFF;
        s->growth_tracker = 0;
        return 1;
    }
    s->skipped_in_row = 0;
    if (!s->enabled) return 0;
    int32_t successful = s->growth_tracker + 1;
    if (successful < LOSSSCALE_INTERVAL) {
        s->growth_tracker = successful;
        return 0;
    }
    s->growth_tracker = 0;
    /* torch keeps the old scale when the grown one would be inf. */
    float grown = s->scale * LOSSSCALE_GROWTH;
    if (!isfinite(grown)) return 0;
    s->scale = grown;
    return 1;
}

int lossscale_restore(loss_scaler *s, int enabled, float scale, int32_t growth_tracker, int64_t skipped)
{
    if (!isfinite(scale) || !(scale > 0))
        return err_set(ERR_INPUT, "loss scale: scale %g is not a positive finite number", (double)scale);
    if (!enabled && scale != 1.0f)
        return err_set(ERR_INPUT, "loss scale: scale %g without loss scaling (only fp16 scales the loss)", (double)scale);
    if (growth_tracker < 0 || growth_tracker >= LOSSSCALE_INTERVAL)
        return err_set(ERR_INPUT, "loss scale: growth_tracker %d outside 0..%d", (int)growth_tracker,
                       LOSSSCALE_INTERVAL - 1);
    if (skipped < 0) return err_set(ERR_INPUT, "loss scale: skipped %lld is negative", (long long)skipped);
    lossscale_init(s, enabled);
    s->scale = scale;
    s->growth_tracker = enabled ? growth_tracker : 0;
    s->skipped = skipped;
    return 0;
}
