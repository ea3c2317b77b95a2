/* The driver that gemm_int8 and gemm_bf16 share (private to them and to
 * gemm_lowp.c, their entry points): products
 * out[N][OC] = in[N][K] @ W[OC][K]^T whose operands come in 32-bit words,
 * each word a short dot product along k (4 int8 for VPDPBUSD, 2 bf16 for
 * VDPBF16PS), so that one instruction adds one word's products into each of
 * 16 accumulator lanes.
 *
 * W is prepared once (struct dot_weights: panels of NR output channels) and
 * the rows of `in` are packed per call, by the product's own packer (which
 * quantises or rounds them), into panels of MR rows. An MR x NR tile of the
 * output is one call of the micro-kernel over all of K, k ascending word by
 * word: a tile's arithmetic never depends on where it sits, on the tiles
 * around it, on N or on the thread that runs it. So each output element is
 * the same sequence of operations in every call, which is what makes the two
 * products batch-invariant. */
#ifndef BERTC_BACKEND_CPU_GEMM_DOT_H
#define BERTC_BACKEND_CPU_GEMM_DOT_H

#include "backend/cpu/cpu_isa.h"

#include <stddef.h>
#include <stdint.h>

/* Every kernel's tile: MR rows by NR = 2 x 16 columns (24 accumulators of
 * 16 lanes, as gemm_fixed's AVX-512 tile). The scalar kernels have the same
 * shape, so the packing, the edges and the threading run on every CPU. */
enum { DOT_MR = 12, DOT_NR = 32, DOT_LANES = 16 };

/* What a tile's epilogue reads: the rows' scales (MR, int8), the columns'
 * scales, bias and starting accumulators (NR each; int8's compensation of
 * the unsigned activations). Unused ones are NULL. */
struct dot_epi {
    const float *rs, *cs, *bias;
    const int32_t *comp;
};

/* The packed rows keep each row's words in runs of four (16 bytes: one
 * store of the packer's vector): word g of row i of a panel is at
 * dot_a_index(g) + 4 i. kg is always a multiple of 4. */
static inline size_t dot_a_index(int g)
{
    return (size_t)(g / 4) * DOT_MR * 4 + (size_t)(g % 4);
}

/* One MR x NR tile over kg words: a[dot_a_index(g) + 4 i] is row i's word
 * g, b[g * NR + j] column j's; out has row stride ldo. */
typedef void (*dot_tile_fn)(int kg, const uint32_t *a, const uint32_t *b, float *out, long ldo,
                            const struct dot_epi *e);
/* Packs one row x (k floats) into its place in a panel: a[dot_a_index(g)]
 * is its word g (kg words, those past k adding nothing), *rs its scale (rs NULL when the product has none). The
 * driver fills the rows past N with the kind's pad word and scale 0. */
typedef void (*dot_pack_fn)(uint32_t *a, float *rs, const float *x, int k, int kg);

struct dot_kern {
    dot_tile_fn tile;
    dot_pack_fn pack;
};

/* A prepared W: npan panels of NR columns, b[(p * kg + g) * NR + j] the word
 * g of channel p * NR + j (kg: the words K takes, rounded up to a multiple of
 * 4; zero words past K and past OC), and per channel (padded to
 * npan * NR with zeros): cs the scale, bias, comp the starting accumulator
 * (cs and comp NULL where the product has none). */
struct dot_weights {
    int oc, k, kg, npan;
    uint32_t *b;
    float *cs, *bias;
    int32_t *comp;
};

/* Allocates w's arrays for OC x K with k_per_word elements per word, zeroed,
 * and copies bias (NULL: zeros); with_scales adds cs and comp. 0, or -1 on
 * out of memory (w freed). */
int dot_weights_alloc(struct dot_weights *w, int oc, int k, int k_per_word, const float *bias, int with_scales);
void dot_weights_free(struct dot_weights *w);
/* The word of channel o at word index g. */
static inline uint32_t *dot_word(const struct dot_weights *w, int o, int g)
{
    return w->b + ((size_t)(o / DOT_NR) * w->kg + g) * DOT_NR + o % DOT_NR;
}
/* Bytes w holds. */
size_t dot_weights_bytes(const struct dot_weights *w);

/* 16 words as an array, and a word in every lane or 16 loaded: the scalar
 * kernels' operands. */
typedef struct {
    uint32_t v[DOT_LANES];
} dot_w16;
static inline dot_w16 dot_w16_bcast(const uint32_t *p)
{
    dot_w16 r;
    for (int l = 0; l < DOT_LANES; l++) r.v[l] = *p;
    return r;
}
static inline dot_w16 dot_w16_load(const uint32_t *p)
{
    dot_w16 r;
    for (int l = 0; l < DOT_LANES; l++) r.v[l] = p[l];
    return r;
}

struct dot_kind;
/* The product with kernel kr of kind k, on up to nthreads threads
 * (nthreads <= 1, or a product too small to share: the calling thread
 * alone, no OpenMP region, so it may be called from inside one). 0, or -1
 * when the working memory cannot be allocated (nothing written; the caller
 * computes its reference loop, the same bits). */
int dot_gemm(const struct dot_kind *k, const struct dot_kern *kr, const struct dot_weights *w, int N, const float *in,
             long ldin, float *out, long ldout, int nthreads);
/* nw products of the same input, w[i] into out[i] (all with the same K and
 * OC): the rows packed once, the tiles of all products shared among the
 * threads; each output's bits those of dot_gemm. */
int dot_gemm_n(const struct dot_kind *k, const struct dot_kern *kr, const struct dot_weights *const *w, int nw, int N,
               const float *in, long ldin, float *const *out, long ldout, int nthreads);

/* A product kind (gemm_lowp.h): its kernels and the hooks of gemm_lowp.c.
 * fast runs at cpu_isa.h's avx512 level, avx2 (where a kind has one) at its
 * avx2 level; a kernel's tile is NULL where it is not compiled (not x86-64)
 * or does not exist. avx2_pick, where not NULL, chooses the avx2 level's
 * kernel and its name on this CPU (gemm_int8: AVX-VNNI's or AVX2's own). */
struct dot_kind {
    cpu_kernel_family family; /* which cpu_isa.h decides between its kernels */
    const char *fast_name;    /* "avx512vnni" */
    struct dot_kern scalar, fast;
    const struct dot_kern *(*avx2_pick)(const char **name);
    int k_per_word, with_scales; /* with_scales: cs, comp and row scales */
    uint32_t pad_word;           /* a word of a row past N: adds nothing */
    /* Packs W (OC rows, stride ldw) into w's words, scales and comp: 0, or
     * -1 on out of memory. */
    int (*fill)(struct dot_weights *w, const float *W, long ldw);
    /* The reference loops (gemm_lowp_ref). */
    void (*ref)(const struct dot_weights *w, int N, const float *in, long ldin, float *out, long ldout);
};
extern const struct dot_kind dot_kind_int8, dot_kind_bf16;

/* gemm_lowp.h's prepared layer. */
struct gemm_lowp_layer {
    int kind; /* gemm_lowp_kind */
    struct dot_weights d;
};

#endif
