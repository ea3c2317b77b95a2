/* Checks that cpu_expf8 and cpu_erff8, and on an AVX-512 CPU cpu_expf16 and
 * cpu_erff16 (backend/cpu/cpu_math.h), give the bits of cpu_expf and
 * cpu_erff for every one of the 2^32 floats, NaNs included (a NaN must come
 * back as the same NaN). A minute or two:
 *
 *   gcc -O2 -Isrc tools/check_vector_math.c -lm -o /tmp/check_vector_math
 *   /tmp/check_vector_math
 *
 * Needs an AVX2 CPU; exits 1 on the first difference. */
#include "backend/cpu/cpu_math.h"

#include <stdio.h>
#include <string.h>

#ifdef CPU_HAVE_AVX2_MATH
__attribute__((target("avx2"))) static void both8(const float *x, float *e, float *r)
{
    __m256 v = _mm256_loadu_ps(x);
    _mm256_storeu_ps(e, cpu_expf8(v));
    _mm256_storeu_ps(r, cpu_erff8(v));
}

/* the same 16 floats, 16 lanes at once */
__attribute__((target("avx512f,avx512dq"))) static void both16(const float *x, float *e, float *r)
{
    __m512 v = _mm512_loadu_ps(x);
    _mm512_storeu_ps(e, cpu_expf16(v));
    _mm512_storeu_ps(r, cpu_erff16(v));
}

int main(void)
{
    if (!__builtin_cpu_supports("avx2")) {
        printf("no AVX2 here: nothing to check\n");
        return 0;
    }
    int w16 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    float x[16], e[16], r[16], e16[16], r16[16];
    for (uint64_t base = 0; base < (1ull << 32); base += 16) {
        for (int l = 0; l < 16; l++) {
            uint32_t u = (uint32_t)(base + (uint64_t)l);
            memcpy(&x[l], &u, sizeof u);
        }
        both8(x, e, r);
        both8(x + 8, e + 8, r + 8);
        if (w16) {
            both16(x, e16, r16);
            if (memcmp(e, e16, sizeof e) || memcmp(r, r16, sizeof r)) {
                printf("16-wide differs in the run at %a\n", x[0]);
                return 1;
            }
        }
        for (int l = 0; l < 16; l++) {
            float we = cpu_expf(x[l]), wr = cpu_erff(x[l]);
            if (memcmp(&we, &e[l], sizeof we) || memcmp(&wr, &r[l], sizeof wr)) {
                printf("differ at %a: exp %a want %a, erf %a want %a\n", x[l], e[l], we, r[l], wr);
                return 1;
            }
        }
    }
    printf("cpu_expf8 and cpu_erff8%s equal cpu_expf and cpu_erff bit for bit on all 2^32 floats\n",
           w16 ? ", cpu_expf16 and cpu_erff16" : " (no AVX-512 here: the 16-wide ones not checked)");
    return 0;
}
#else
int main(void)
{
    printf("not an x86-64 GCC build: no vector math to check\n");
    return 0;
}
#endif
