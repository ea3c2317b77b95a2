/* The price of exact sums in gemm_int8's avx2 kernel (docs/DESIGN.md, "int8
 * on AVX2"): the 12 x 32 tile over K 384 (L1-resident operands) as
 *   sign4x16   bertc's: |q_i| x (q_o with q_i's sign), VPABSB + VPSIGNB +
 *              VPMADDUBSW + VPMADDWD + VPADDD, 4 rows x 16 columns a pass;
 *   plain4x16  the same tile without the sign, as on 7-bit weights (oneDNN's
 *              choice; clips on 8-bit ones): VPMADDUBSW + VPMADDWD + VPADDD;
 *   plain3x32  the same, 3 rows x 32 columns, the weights as memory operands;
 *   sign6x16   bertc's with 6 rows a pass (spills);
 * each the best of 15 rounds of 2,000 tiles, printed in G int8 ops/s (2 per
 * multiply-add). The integer results are not checked here: test_gemm_int8
 * holds bertc's kernel.
 *   gcc -O2 bench/gemm/int8_avx2_tile.c -o int8_avx2_tile && ./int8_avx2_tile */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#define MR 12
#define NR 32
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
#define T __attribute__((target("avx2,fma"), noinline))
#define PRAGMA(x) _Pragma(#x)
#define UNROLL(n) PRAGMA(GCC unroll n)
/* The 16-bit pair sums of A's 4 bytes s (broadcast; u what the row takes
 * of them once) with B's 32 bytes b: bertc's sign trick, and the plain
 * product of 7-bit weights. */
#define SIGNED_U(s) _mm256_abs_epi8(s)
#define SIGNED(u, s, b) _mm256_maddubs_epi16(u, _mm256_sign_epi8(b, s))
#define PLAIN_U(s) (s)
#define PLAIN(u, s, b) _mm256_maddubs_epi16(u, b)
/* A kernel of R rows x 16 columns a pass, PROD its products. */
#define TILE16(name, R, PROD)                                                                                   \
    T void name(int kg, const uint32_t *a, const uint32_t *b, int32_t *out) {                                   \
        const __m256i ones = _mm256_set1_epi16(1);                                                              \
        for (int h = 0; h < NR; h += 16)                                                                        \
            for (int i0 = 0; i0 < MR; i0 += R) {                                                                \
                __m256i c[R][2] = {0};                                                                          \
                const uint32_t *ap = a + 4 * i0, *bp = b + h;                                                   \
                for (int g = 0; g < kg; g += 4, ap += 4 * MR)                                                   \
                    UNROLL(4) for (int gg = 0; gg < 4; gg++, bp += NR) {                                        \
                        __m256i b0 = _mm256_loadu_si256((const __m256i *)bp),                                   \
                                b1 = _mm256_loadu_si256((const __m256i *)(bp + 8));                             \
                        UNROLL(R) for (int r = 0; r < R; r++) {                                                 \
                            __m256i s = _mm256_set1_epi32(ap[4 * r + gg]), u = PROD##_U(s);                     \
                            c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(PROD(u, s, b0), ones));       \
                            c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(PROD(u, s, b1), ones));       \
                        }                                                                                       \
                    }                                                                                           \
                for (int r = 0; r < R; r++)                                                                     \
                    for (int v = 0; v < 2; v++)                                                                 \
                        _mm256_storeu_si256((__m256i *)(out + (i0 + r) * NR + h + 8 * v), c[r][v]);             \
            }                                                                                                   \
    }
/* sign trick 4x16 */
TILE16(k_sign, 4, SIGNED)
/* 7-bit weights, 4x16 */
TILE16(k_plain, 4, PLAIN)
/* sign trick 6x16 */
TILE16(k_sign5, 6, SIGNED)
/* 7-bit weights, 3x32, B from memory */
T void k_plain3(int kg, const uint32_t *a, const uint32_t *b, int32_t *out) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i0 = 0; i0 < MR; i0 += 3) {
        __m256i c[3][4] = {0};
        const uint32_t *ap = a + 4 * i0, *bp = b;
        for (int g = 0; g < kg; g += 4, ap += 4 * MR)
#pragma GCC unroll 4
            for (int gg = 0; gg < 4; gg++, bp += NR) {
#pragma GCC unroll 3
                for (int r = 0; r < 3; r++) {
                    __m256i s = _mm256_set1_epi32(ap[4 * r + gg]);
#pragma GCC unroll 4
                    for (int v = 0; v < 4; v++)
                        c[r][v] = _mm256_add_epi32(
                            c[r][v],
                            _mm256_madd_epi16(
                                _mm256_maddubs_epi16(s, _mm256_loadu_si256((const __m256i *)(bp + 8 * v))), ones));
                }
            }
        for (int r = 0; r < 3; r++)
            for (int v = 0; v < 4; v++)
                _mm256_storeu_si256((__m256i *)(out + (i0 + r) * NR + 8 * v), c[r][v]);
    }
}

int main() {
    int kg = 96;
    static uint32_t a[96 * MR], b[96 * NR];
    static int32_t o[MR * NR];
    for (int i = 0; i < 96 * MR; i++)
        a[i] = i * 2654435761u;
    for (int i = 0; i < 96 * NR; i++)
        b[i] = (i * 40503u) & 0x3f3f3f3f;
    void (*f[4])(int, const uint32_t *, const uint32_t *, int32_t *) = {k_sign, k_plain, k_plain3, k_sign5};
    const char *n[4] = {"sign4x16", "plain4x16", "plain3x32", "sign6x16"};
    double best[4] = {1e9, 1e9, 1e9, 1e9};
    int reps = 2000;
    for (int round = 0; round < 15; round++)
        for (int v = 0; v < 4; v++) {
            double t = now();
            for (int r = 0; r < reps; r++)
                f[v](kg, a, b, o);
            t = now() - t;
            if (t < best[v])
                best[v] = t;
        }
    for (int v = 0; v < 4; v++)
        printf("%s %.1f Gops/s\n", n[v], 2.0 * MR * NR * kg * 4 * reps / best[v] * 1e-9);
}
