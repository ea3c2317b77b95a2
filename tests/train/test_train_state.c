/* The loss scaler's part of a checkpoint (train_ckpt.h:
 * train_ckpt_put_scaler, train_ckpt_get_scaler; state.h: state.json's
 * loss_scale and loss_scale_growth_tracker): a scaler saved at any step of
 * a long run with overflows and growths, written to state.json, read back
 * and restored, goes on exactly as the scaler that never stopped; an older state.json
 * without the tracker reads as 0; values no scaler has are refused with
 * the file and field named. fp16 never runs on the CPU, so this and the
 * BERTC_DEBUG_LOSS_SCALE runs of tests/cli/train_lossscale.sh are what
 * check the trainer's wiring of the scaler here. */
#include "testutil.h"

#include "core/err.h"
#include "core/fileio.h"
#include "train/lossscale.h"
#include "train/state.h"
#include "train/train_ckpt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_scaler(const loss_scaler *a, const loss_scaler *b)
{
    return a->enabled == b->enabled && a->scale == b->scale && a->growth_tracker == b->growth_tracker &&
           a->skipped == b->skipped;
}

static void fresh_state(train_state *s)
{
    memset(s, 0, sizeof *s);
    s->step = 10;
    s->smoothed_loss = 1.5;
    snprintf(s->version, sizeof s->version, "test");
    train_state_fp_set(s, "--precision", "fp16");
}

/* The state through state.json and back. */
static int roundtrip(const train_state *s, train_state *out, const char *path)
{
    char *text;
    size_t len;
    int rc = train_state_to_json(s, &text, &len);
    if (rc) return rc;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(text);
        return err_set(ERR_RUNTIME, "%s: cannot write", path);
    }
    fwrite(text, 1, len, f);
    fclose(f);
    free(text);
    return train_state_load(path, out);
}

/* Overflow at pseudo-random steps (about 1 in 2500) over 9000 steps, so the
 * scale both halves and grows (every 2000 clean steps); a checkpoint every
 * 500 steps goes through state.json and must continue as the original. */
static void check_resume_exact(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/state.json", dir);
    loss_scaler ref;
    lossscale_init(&ref, 1);
    uint32_t x = 12345;
    int checked = 0, growths = 0, halvings = 0;
    for (int step = 1; step <= 9000; step++) {
        x = x * 1103515245u + 12345u;
        int inf = (x >> 8) % 2500 == 0 || step == 3 || step == 4;
        float before = ref.scale;
        lossscale_update(&ref, inf);
        growths += ref.scale > before;
        halvings += ref.scale < before;
        if (step % 500 != 0) continue;
        train_state s, r;
        fresh_state(&s);
        s.skipped_steps = ref.skipped; /* the optimizer's count, the same */
        train_ckpt_put_scaler(&s, &ref);
        CHECK(roundtrip(&s, &r, path) == 0, "step %d: %s", step, err_msg());
        loss_scaler back;
        CHECK(train_ckpt_get_scaler(&r, 1, &back, path) == 0, "step %d: %s", step, err_msg());
        CHECK(same_scaler(&back, &ref), "step %d: restored scale %g tracker %d skipped %lld, want %g %d %lld", step,
              (double)back.scale, back.growth_tracker, (long long)back.skipped, (double)ref.scale, ref.growth_tracker,
              (long long)ref.skipped);
        /* The restored one and the original go on in step for 2500 more. */
        loss_scaler a = ref, b = back;
        uint32_t y = x;
        int same = 1;
        for (int k = 0; k < 2500; k++) {
            y = y * 1103515245u + 12345u;
            int f = (y >> 8) % 2500 == 0;
            lossscale_update(&a, f);
            lossscale_update(&b, f);
            same &= same_scaler(&a, &b);
        }
        CHECK(same, "step %d: the restored scaler drifts from the original", step);
        checked++;
    }
    printf("resume: %d checkpoints through state.json, each continued 2500 steps; the run had %d halvings, %d "
           "growths, %lld skipped, final scale %g\n",
           checked, halvings, growths, (long long)ref.skipped, (double)ref.scale);
    CHECK(checked == 18 && growths >= 1 && halvings >= 3, "the run should halve and grow (%d, %d)", halvings, growths);
}

static void check_json_fields(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fields.json", dir);
    loss_scaler ls;
    lossscale_init(&ls, 1);
    ls.scale = 2048.0f;
    ls.growth_tracker = 1234;
    ls.skipped = 5;
    train_state s;
    fresh_state(&s);
    s.skipped_steps = 5;
    train_ckpt_put_scaler(&s, &ls);
    char *text;
    size_t len;
    CHECK(train_state_to_json(&s, &text, &len) == 0, "%s", err_msg());
    int has_scale = strstr(text, "\"loss_scale\": 2048") != NULL;
    int has_tracker = strstr(text, "\"loss_scale_growth_tracker\": 1234,") != NULL;
    printf("state.json: loss_scale 2048 %s, loss_scale_growth_tracker 1234 %s\n", has_scale ? "written" : "MISSING",
           has_tracker ? "written" : "MISSING");
    CHECK(has_scale && has_tracker, "state.json lacks the scaler fields:\n%s", text);

    /* An older state.json has no tracker: it reads as 0 (those runs never scaled). */
    char *old = strstr(text, "  \"loss_scale_growth_tracker\": 1234,\n");
    if (old) memmove(old, old + strlen("  \"loss_scale_growth_tracker\": 1234,\n"),
                     strlen(old + strlen("  \"loss_scale_growth_tracker\": 1234,\n")) + 1);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    free(text);
    train_state r;
    CHECK(train_state_load(path, &r) == 0, "without the tracker: %s", err_msg());
    printf("without the tracker field: load rc 0, tracker %lld, scale %g\n", (long long)r.loss_scale_growth,
           r.loss_scale);
    CHECK(r.loss_scale_growth == 0 && r.loss_scale == 2048, "tracker %lld scale %g", (long long)r.loss_scale_growth,
          r.loss_scale);
}

/* A state whose scaler fields are set to the given values must be refused
 * with ERR_INPUT and a message holding `want`. */
static void refuse(const char *what, double scale, int64_t tracker, int enabled, const char *want)
{
    train_state s;
    fresh_state(&s);
    s.loss_scale = scale;
    s.loss_scale_growth = tracker;
    loss_scaler ls;
    int rc = train_ckpt_get_scaler(&s, enabled, &ls, "RUN/checkpoints/step-00000010/state.json");
    tu_expect_input_error(what, rc, "step-00000010/state.json", want, NULL);
    err_clear();
}

static void check_refusals(const char *dir)
{
    refuse("tracker 2000", 1024, 2000, 1, "growth_tracker 2000");
    refuse("tracker past int32", 1024, (int64_t)1 << 40, 1, "loss_scale_growth_tracker");
    refuse("scale 0", 0, 0, 1, "scale 0");
    refuse("scale -4", -4, 0, 1, "scale -4");
    refuse("scale null (NaN)", NAN, 0, 1, "not a positive finite number");
    refuse("scale 0.1 (not a float)", 0.1, 0, 1, "not a float32 value");
    refuse("scale 1e300", 1e300, 0, 1, "not a float32 value");
    refuse("scale 65536 without scaling", 65536, 0, 0, "without loss scaling");
    /* A negative tracker in the file is the reader's to refuse. */
    char path[4096];
    snprintf(path, sizeof path, "%s/neg.json", dir);
    train_state s, r;
    fresh_state(&s);
    s.loss_scale = 1;
    s.loss_scale_growth = -3;
    int rc = roundtrip(&s, &r, path);
    printf("tracker -3 in state.json: rc %d: %s\n", rc, rc ? err_msg() : "(accepted)");
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "neg.json") && strstr(err_msg(), "loss_scale_growth_tracker"),
          "negative tracker: rc %d '%s'", rc, err_msg());
    err_clear();
    /* A disabled scaler (fp32) restores as scale 1, tracker 0. */
    fresh_state(&s);
    s.loss_scale = 1;
    s.skipped_steps = 7;
    loss_scaler ls;
    rc = train_ckpt_get_scaler(&s, 0, &ls, "x");
    CHECK(rc == 0 && !ls.enabled && ls.scale == 1.0f && ls.skipped == 7, "fp32 state: rc %d scale %g skipped %lld", rc,
          (double)ls.scale, (long long)ls.skipped);
}

int main(void)
{
    const char *dir = tu_tmpdir();
    check_json_fields(dir);
    check_resume_exact(dir);
    check_refusals(dir);
    return tu_done();
}
