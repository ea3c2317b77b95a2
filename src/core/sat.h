/* Saturating size arithmetic: a size that would overflow becomes SIZE_MAX
 * (INT64_MAX for the int64_t ones) and stays there, so an allocation of it
 * fails and a memory plan of it reads "overflow", and neither wraps to a
 * small number. The one place for it: the allocations (alloc.h's
 * mul_size), the model's activation table (model/act_sizes.h), the memory
 * planner and the CUDA workspace rules (backend/ws_rules.h) all use these. */
#ifndef BERTC_SAT_H
#define BERTC_SAT_H

#include <stddef.h>
#include <stdint.h>

static inline size_t sat_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static inline size_t sat_mul(size_t a, size_t b)
{
    return a && b > SIZE_MAX / a ? SIZE_MAX : a * b;
}

/* n rounded up to a multiple of align (a power of two). */
static inline size_t sat_round_up(size_t n, size_t align)
{
    return n > SIZE_MAX - (align - 1) ? SIZE_MAX : (n + align - 1) & ~(align - 1);
}

/* n as an int64_t: INT64_MAX from there up. */
static inline int64_t sat_i64(size_t n)
{
    return n >= (size_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* a + b for a, b >= 0, INT64_MAX from there up. */
static inline int64_t sat_add_i64(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

#endif
