/* squad_load on arbitrary bytes: loads or fails with ERR_INPUT, and what it
 * loads is consistent (every answer start points at its text). */
#include "fuzz.h"
#include "data/squad.h"

FUZZ_QUIET_INIT

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    squad_data d;
    int rc = squad_load(fuzz_write("train.json", data, size), &d);
    fuzz_check_rc(rc, "squad_load");
    if (rc) return 0;
    FUZZ_ASSERT(d.n >= 0 && d.ncontexts >= 0, "n %d ncontexts %d", d.n, d.ncontexts);
    for (int c = 0; c < d.ncontexts; c++) {
        const squad_context *x = &d.contexts[c];
        FUZZ_ASSERT(x->ncp >= 0 && (size_t)x->ncp <= x->nbytes, "context %d: %d code points in %zu bytes", c, x->ncp,
                    x->nbytes);
        FUZZ_ASSERT(x->cp_byte[x->ncp] == (int32_t)x->nbytes, "context %d", c);
        for (int k = 0; k < x->ncp; k++) FUZZ_ASSERT(x->cp_byte[k] < x->cp_byte[k + 1], "context %d cp %d", c, k);
    }
    for (int i = 0; i < d.n; i++) {
        const squad_example *e = &d.ex[i];
        FUZZ_ASSERT(e->context >= 0 && e->context < d.ncontexts, "example %d", i);
        FUZZ_ASSERT(e->id && e->question, "example %d", i);
        FUZZ_ASSERT(e->train_answer >= -1 && e->train_answer < e->n_answers, "example %d", i);
        const squad_context *x = &d.contexts[e->context];
        for (int k = 0; k < e->n_answers; k++) {
            int s = e->answer_start[k];
            FUZZ_ASSERT(s >= -1 && s <= x->ncp, "example %s answer %d start %d of %d", e->id, k, s, x->ncp);
            if (s < 0) continue;
            size_t len = strlen(e->answer_text[k]), b = (size_t)x->cp_byte[s];
            FUZZ_ASSERT(b + len <= x->nbytes && memcmp(x->text + b, e->answer_text[k], len) == 0,
                        "example %s answer %d: start %d does not point at its text", e->id, k, s);
        }
    }
    squad_free(&d);
    return 0;
}
