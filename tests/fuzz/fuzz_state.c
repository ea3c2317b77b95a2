/* train_state_load on arbitrary bytes (a checkpoint's state.json): loads or
 * fails with ERR_INPUT; a loaded state written back with
 * train_state_to_json loads again to the same values, and compares equal to
 * itself. bertc_version is cut to the field's 31 bytes, possibly inside a
 * UTF-8 sequence, which train_state_to_json then drops (known, harmless: the
 * trainer overwrites the version before saving), so a state whose version
 * fills the field is not written back. */
#include "fuzz.h"
#include "train/state.h"

#include <math.h>

FUZZ_QUIET_INIT

/* state.json stores a non-finite double as null, read back as NaN: NaN
 * round-trips to NaN, which == would call a change. */
static int same_double(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s", fuzz_write("state.json", data, size));
    train_state *s = malloc(sizeof *s), *back = malloc(sizeof *back);
    FUZZ_ASSERT(s && back, "malloc");
    int rc = train_state_load(path, s);
    fuzz_check_rc(rc, "train_state_load");
    if (rc == 0 && strlen(s->version) + 1 < sizeof s->version) {
        FUZZ_ASSERT(s->nfp >= 0 && s->nfp <= TRAIN_STATE_MAX_FP, "nfp %d", s->nfp);
        rc = train_state_fp_compare(s, s, "fuzz");
        FUZZ_ASSERT(rc == 0, "a state differs from itself: %s", err_msg());
        char *text;
        size_t len;
        rc = train_state_to_json(s, &text, &len);
        FUZZ_ASSERT(rc == 0, "train_state_to_json: %s", err_msg());
        char path2[512];
        snprintf(path2, sizeof path2, "%s", fuzz_write("state2.json", text, len));
        free(text);
        rc = train_state_load(path2, back);
        FUZZ_ASSERT(rc == 0, "train_state_load of what train_state_to_json wrote: %s", err_msg());
        FUZZ_ASSERT(back->step == s->step && back->epoch == s->epoch && back->cursor == s->cursor &&
                        back->shuffle_seed == s->shuffle_seed && back->rng_seed == s->rng_seed &&
                        back->rng_counter == s->rng_counter && same_double(back->loss_scale, s->loss_scale) &&
                        back->skipped_steps == s->skipped_steps && back->restarts == s->restarts &&
                        same_double(back->elapsed_s, s->elapsed_s) && same_double(back->smoothed_loss, s->smoothed_loss) &&
                        back->examples_seen == s->examples_seen && !strcmp(back->version, s->version) &&
                        back->nfp == s->nfp,
                    "state.json round trip changed a value");
        rc = train_state_fp_compare(s, back, "fuzz");
        FUZZ_ASSERT(rc == 0, "round trip changed the fingerprint: %s", err_msg());
    }
    free(s);
    free(back);
    return 0;
}
