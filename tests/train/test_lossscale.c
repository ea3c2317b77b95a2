/* The loss scaler's state machine against GradScaler's rules (2^16 at the
 * start, x0.5 and a skipped step on inf/NaN, x2 after 2000 clean steps in
 * a row, no growth past the largest float), its restore checks, and a long
 * random run against an independent tally. */
#include "testutil.h"

#include "core/err.h"
#include "train/lossscale.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void run_clean(loss_scaler *s, int n)
{
    for (int i = 0; i < n; i++) lossscale_update(s, 0);
}

static void check_defaults(void)
{
    loss_scaler s;
    lossscale_init(&s, 1);
    printf("init: scale %g, unscale %g\n", (double)lossscale_scale(&s), (double)lossscale_unscale(&s));
    CHECK(lossscale_scale(&s) == 65536.0f, "initial scale %g", (double)s.scale);
    CHECK(lossscale_unscale(&s) == 1.0f / 65536.0f, "unscale %g", (double)lossscale_unscale(&s));
    CHECK(s.growth_tracker == 0 && s.skipped == 0, "fresh state");

    run_clean(&s, 1999);
    CHECK(s.scale == 65536.0f && s.growth_tracker == 1999, "after 1999 clean steps: %g, tracker %d", (double)s.scale,
          s.growth_tracker);
    int changed = lossscale_update(&s, 0);
    printf("after 2000 clean steps: scale %g, tracker %d, changed %d\n", (double)s.scale, s.growth_tracker, changed);
    CHECK(changed == 1 && s.scale == 131072.0f && s.growth_tracker == 0, "doubling at 2000");

    changed = lossscale_update(&s, 1);
    printf("after an overflow: scale %g, skipped %lld\n", (double)s.scale, (long long)s.skipped);
    CHECK(changed == 1 && s.scale == 65536.0f && s.skipped == 1 && s.skipped_in_row == 1, "halving on overflow");

    /* An overflow resets the run of clean steps. */
    run_clean(&s, 1500);
    lossscale_update(&s, 1);
    CHECK(s.scale == 32768.0f && s.growth_tracker == 0, "tracker reset: %g, %d", (double)s.scale, s.growth_tracker);
    run_clean(&s, 1999);
    CHECK(s.scale == 32768.0f, "no growth before 2000 clean steps after the reset");
    run_clean(&s, 1);
    CHECK(s.scale == 65536.0f, "growth at the 2000th: %g", (double)s.scale);
    CHECK(s.skipped == 2 && s.skipped_in_row == 0, "skipped %lld, in a row %lld", (long long)s.skipped,
          (long long)s.skipped_in_row);

    /* A burst of overflows: each halves; all are counted. */
    for (int i = 0; i < 20; i++) lossscale_update(&s, 1);
    printf("after 20 overflows in a row: scale %g (2^-4 = %g), skipped %lld, in a row %lld\n", (double)s.scale,
           ldexp(1, -4), (long long)s.skipped, (long long)s.skipped_in_row);
    CHECK(s.scale == ldexpf(1.0f, -4), "scale after 20 halvings from 2^16");
    CHECK(s.skipped == 22 && s.skipped_in_row == 20, "counts");
}

static void check_growth_limit(void)
{
    loss_scaler s;
    /* From 2^127 the next doubling is inf: torch keeps the old scale. */
    CHECK(lossscale_restore(&s, 1, ldexpf(1.0f, 127), 1999, 5) == 0, "%s", err_msg());
    int changed = lossscale_update(&s, 0);
    printf("at 2^127 after the 2000th clean step: scale %g, changed %d, tracker %d\n", (double)s.scale, changed,
           s.growth_tracker);
    CHECK(changed == 0 && s.scale == ldexpf(1.0f, 127) && s.growth_tracker == 0, "no growth to inf");
    CHECK(isfinite(lossscale_unscale(&s)) && lossscale_unscale(&s) > 0, "unscale stays finite");
}

static void check_disabled(void)
{
    loss_scaler s;
    lossscale_init(&s, 0);
    CHECK(s.scale == 1.0f && lossscale_unscale(&s) == 1.0f, "disabled scale 1");
    run_clean(&s, 5000);
    CHECK(s.scale == 1.0f, "no growth when disabled");
    CHECK(lossscale_update(&s, 1) == 0 && s.scale == 1.0f && s.skipped == 1, "skips counted, scale kept");
}

static void check_restore(void)
{
    loss_scaler s;
    CHECK(lossscale_restore(&s, 1, 1024.0f, 17, 3) == 0 && s.scale == 1024.0f && s.growth_tracker == 17 &&
              s.skipped == 3,
          "restore");
    run_clean(&s, 1982);
    CHECK(s.scale == 1024.0f, "resumed tracker still counts to 2000");
    run_clean(&s, 1);
    CHECK(s.scale == 2048.0f, "growth after 17 + 1983 clean steps: %g", (double)s.scale);
    struct {
        int enabled;
        float scale;
        int32_t tracker;
        int64_t skipped;
        const char *msg;
    } bad[] = {
        {1, NAN, 0, 0, "not a positive finite"},      {1, INFINITY, 0, 0, "not a positive finite"},
        {1, 0.0f, 0, 0, "not a positive finite"},     {1, -2.0f, 0, 0, "not a positive finite"},
        {1, 2.0f, -1, 0, "growth_tracker -1"},        {1, 2.0f, 2000, 0, "growth_tracker 2000"},
        {1, 2.0f, 0, -1, "skipped -1"},               {0, 2.0f, 0, 0, "without loss scaling"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = lossscale_restore(&s, bad[i].enabled, bad[i].scale, bad[i].tracker, bad[i].skipped);
        printf("restore(%d, %g, %d, %lld) -> %d: %s\n", bad[i].enabled, (double)bad[i].scale, (int)bad[i].tracker,
               (long long)bad[i].skipped, rc, err_msg());
        CHECK(rc == ERR_INPUT && strstr(err_msg(), bad[i].msg), "bad restore %zu", i);
    }
    err_clear();
}

/* A long random run against a tally kept here: the scale is 2^16 times 2
 * to the (growths - halvings), growth happens exactly at every 2000th
 * clean step of a run. */
static void check_random_run(void)
{
    loss_scaler s;
    lossscale_init(&s, 1);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int exponent = 16, run = 0;
    int64_t infs = 0;
    int ok = 1;
    for (int i = 0; i < 200000 && ok; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* overflow about once in 3000 steps, in bursts now and then */
        int inf = (x % 3000) == 0 || ((x >> 20) % 50000) < 3;
        lossscale_update(&s, inf);
        if (inf) {
            exponent--;
            run = 0;
            infs++;
        } else if (++run == 2000) {
            exponent++;
            run = 0;
        }
        if (s.scale != ldexpf(1.0f, exponent) || s.growth_tracker != run || s.skipped != infs) ok = 0;
    }
    printf("random run: %lld overflows, final scale 2^%d (%g), tracker %d\n", (long long)infs, exponent,
           (double)s.scale, s.growth_tracker);
    CHECK(ok, "the scaler left the tally: scale %g vs 2^%d, tracker %d vs %d, skipped %lld vs %lld", (double)s.scale,
          exponent, s.growth_tracker, run, (long long)s.skipped, (long long)infs);
    CHECK(infs > 20, "the run should exercise overflows (%lld)", (long long)infs);
}

int main(void)
{
    check_defaults();
    check_growth_limit();
    check_disabled();
    check_restore();
    check_random_run();
    return tu_done();
}
