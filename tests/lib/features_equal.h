/* features_equal for the features tests: the same windows, byte for byte. */
#ifndef BERTC_TEST_FEATURES_EQUAL_H
#define BERTC_TEST_FEATURES_EQUAL_H

#include "data/features.h"

#include <string.h>

static inline int features_equal(const features *a, const features *b)
{
    if (a->n != b->n || a->T != b->T) return 0;
    size_t c = (size_t)a->n * a->T * 4, r = (size_t)a->n * 4;
    return !memcmp(a->input_ids, b->input_ids, c) && !memcmp(a->token_type_ids, b->token_type_ids, c) &&
           !memcmp(a->attention_mask, b->attention_mask, c) && !memcmp(a->offset_begin, b->offset_begin, c) &&
           !memcmp(a->offset_end, b->offset_end, c) && !memcmp(a->start_positions, b->start_positions, r) &&
           !memcmp(a->end_positions, b->end_positions, r) && !memcmp(a->example, b->example, r);
}

#endif
