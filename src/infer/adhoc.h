/* Questions that come from a user rather than a SQuAD file (`bertc ask`,
 * `bertc serve`): (context, question) pairs made into a squad_data that
 * features_build and postprocess_predictions take, exactly as squad_load
 * would load the same text from a file (one paragraph per pair, the code
 * point index of each context). */
#ifndef BERTC_ADHOC_H
#define BERTC_ADHOC_H

#include "data/squad.h"

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1-4; at most n bytes read), 0
 * when it is not valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF). */
int utf8_seq_len(const unsigned char *s, size_t n);
/* 0 when s[0, n) is valid UTF-8 without a NUL byte; else 1, with the offset
 * of the first bad byte in *bad_at. */
int utf8_find_invalid(const char *s, size_t n, size_t *bad_at);

/* d: n examples, example i asks questions[i] about contexts[i] (lens[i]
 * bytes; the texts are copied). ids[i] names example i (NULL: "0", "1",
 * ...). ERR_INPUT "WHAT: invalid UTF-8 (or a NUL byte) at byte B" when a
 * context is not valid UTF-8 (what: how the caller names the context;
 * with n > 1 the item's index follows it). */
int adhoc_data(squad_data *d, int n, const char *const *contexts, const size_t *lens, const char *const *questions,
               const char *const *ids, const char *what);

#endif
