/* Host floats to and from activation memory of a backend's type
 * (backend_act_upload, backend.h). The 16-bit conversions round to nearest
 * even as CUDA's __float2half_rn and __float2bfloat16_rn do (subnormals
 * kept, a NaN becomes the canonical 0x7fff), so a value uploaded here is
 * the one a kernel storing the same float would have written. */
#include "backend/backend.h"

#include "core/err.h"
#include "core/half.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

/* Rounds the 24-bit significand m (implicit bit set) right by shift bits,
 * to nearest, ties to even. */
static uint32_t round_shift(uint32_t m, int shift)
{
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1);
    return q + (rem > tie || (rem == tie && (q & 1u)));
}

static uint16_t f16_of_float(float f)
{
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return 0x7fff;
    int e = (int)(ax >> 23) - 127;
    if (e >= 16) return (uint16_t)(sign | 0x7c00u); /* past 65504 and its rounding range, inf */
    if (e < -25) return (uint16_t)sign;              /* under half the least subnormal: zero */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    /* A normal half keeps 10 fraction bits; a subnormal one fewer for each
     * step of exponent below -14. A carry out of the significand moves to
     * the next exponent (or from the subnormals to the least normal). */
    uint32_t h = e >= -14 ? ((uint32_t)(e + 14) << 10) + round_shift(m, 13) : round_shift(m, 13 - 14 - e);
    return (uint16_t)(sign | (h >= 0x7c00u ? 0x7c00u : h));
}

static uint16_t bf16_of_float(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void backend_act_from_float(backend_dtype t, void *dst, const float *src, size_t n)
{
    if (t == BACKEND_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = t == BACKEND_F16 ? f16_of_float(src[i]) : bf16_of_float(src[i]);
}

void backend_act_to_float(backend_dtype t, float *dst, const void *src, size_t n)
{
    if (t == BACKEND_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = t == BACKEND_F16 ? f16_to_float(s[i]) : bf16_to_float(s[i]);
}

void backend_act_round(backend_dtype t, float *x, size_t n)
{
    if (t == BACKEND_F32) return;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        backend_act_from_float(t, &h, &x[i], 1);
        backend_act_to_float(t, &x[i], &h, 1);
    }
}

int backend_act_upload(const backend *b, backend_act *dst, const float *src, size_t n)
{
    backend_dtype t = backend_act_type(b);
    if (t == BACKEND_F32) return b->i->upload(b->ctx, dst, src, n * sizeof(float));
    uint16_t *tmp = malloc(n ? n * sizeof *tmp : 1);
    if (!tmp) return err_set(ERR_RUNTIME, "backend_act_upload: out of memory for %zu host values", n);
    backend_act_from_float(t, tmp, src, n);
    int rc = b->i->upload(b->ctx, dst, tmp, n * sizeof *tmp);
    free(tmp);
    return rc;
}

int backend_act_download(const backend *b, float *dst, const backend_act *src, size_t n)
{
    backend_dtype t = backend_act_type(b);
    if (t == BACKEND_F32) return b->i->download(b->ctx, dst, src, n * sizeof(float));
    uint16_t *tmp = malloc(n ? n * sizeof *tmp : 1);
    if (!tmp) return err_set(ERR_RUNTIME, "backend_act_download: out of memory for %zu host values", n);
    int rc = b->i->download(b->ctx, tmp, src, n * sizeof *tmp);
    if (!rc) backend_act_to_float(t, dst, tmp, n);
    free(tmp);
    return rc;
}
