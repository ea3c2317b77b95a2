/* cudaemu's <mma.h>: nvcuda::wmma, the warp-level Tensor Core fragments,
 * for the 16 x 16 x 16 shape with __half or __nv_bfloat16 inputs and float
 * accumulators (what bertc's kernels use).
 *
 * A fragment is each lane's share of a 16 x 16 tile: num_elements values
 * in x[], lane l holding tile elements l, l + 32, l + 64, ... (row-major
 * index). CUDA leaves that mapping unspecified, and so must a kernel: it
 * may apply the same operation to every x[i] (a scale, a conversion) but
 * must not assume which row or column an element is; to work on rows it
 * stores the fragment to shared memory.
 *
 * load_matrix_sync, store_matrix_sync and mma_sync are warp-collective, as
 * on the GPU: every lane of the warp must call the same one with the same
 * pointer, leading dimension and layout. A lane that never calls it (it
 * returned, waits at a barrier or in another warp intrinsic), or calls it
 * with other arguments, stops the run naming the kernel, the block and the
 * lane (cudaemu_mma.cc, on the execution model's warp machinery). So do a
 * pointer not 32-byte aligned and a leading dimension not a multiple of 16
 * bytes (CUDA's requirements), and a tile that reaches past a device
 * allocation. fill_fragment is per lane, as in CUDA.
 *
 * mma_sync computes D = A B + C in fp32: the 16-bit inputs' products are
 * exact in fp32, and each is added to the running sum in k order, rounded
 * to fp32 (a Tensor Core adds in another order and may truncate: the
 * emulated sums differ from a card's in the last bits). */
#ifndef CUDAEMU_MMA_H
#define CUDAEMU_MMA_H

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"

namespace cudaemu {

/* What a lane brings to a warp-collective WMMA call. */
enum wmma_op { WMMA_LOAD_A, WMMA_LOAD_B, WMMA_LOAD_C, WMMA_STORE_C, WMMA_MMA };

struct wmma_slot {
    int op;
    const void *ptr;  /* the tile in memory (loads and stores) */
    unsigned ldm;     /* its leading dimension, in elements */
    int layout;       /* 0 row-major, 1 column-major */
    size_t esz;       /* the bytes of one element in memory */
    const float *a, *b; /* mma: the lane's A and B fragments, as fp32 */
};

/* The lane's index in its warp. */
int wmma_lane(void);
/* Publishes the lane's slot and waits until every lane of its warp has
 * called the same operation with the same arguments (else stops the run);
 * returns the warp's 32 slots, readable until wmma_end. */
const wmma_slot *wmma_begin(const wmma_slot &mine, const char *name);
/* Waits until every lane of the warp is done reading the slots. */
void wmma_end(const char *name);

} // namespace cudaemu

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* 16 x 16 tiles over a warp: 8 elements per lane. */
enum { CUDAEMU_TILE = 16, CUDAEMU_PER_LANE = 256 / 32 };

template <typename Use, int m, int n, int k, typename T, typename Layout = void> class fragment;

template <typename T> static inline float cudaemu_wmma_f(T v);
template <> inline float cudaemu_wmma_f<__half>(__half v) { return __half2float(v); }
template <> inline float cudaemu_wmma_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> inline float cudaemu_wmma_f<float>(float v) { return v; }
template <typename T> static inline T cudaemu_wmma_t(float v);
template <> inline __half cudaemu_wmma_t<__half>(float v) { return __float2half_rn(v); }
template <> inline __nv_bfloat16 cudaemu_wmma_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> inline float cudaemu_wmma_t<float>(float v) { return v; }

template <typename T> struct cudaemu_fragment_base {
    enum { num_elements = CUDAEMU_PER_LANE };
    typedef T element_type;
    typedef T storage_element_type;
    T x[num_elements];
};

/* matrix_a and matrix_b (the accumulator: below) */
template <typename Use, typename T, typename Layout>
class fragment<Use, 16, 16, 16, T, Layout> : public cudaemu_fragment_base<T> {
    static_assert(std::is_same<Use, matrix_a>::value || std::is_same<Use, matrix_b>::value,
                  "cudaemu's wmma: matrix_a, matrix_b, or an accumulator of float");
    static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                  "cudaemu's wmma: matrix_a and matrix_b of __half or __nv_bfloat16");
    static_assert(std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value,
                  "matrix_a and matrix_b need row_major or col_major");
};
template <> class fragment<accumulator, 16, 16, 16, float, void> : public cudaemu_fragment_base<float> {};

template <typename Use, typename T, typename Layout>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, const T &v)
{
    for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}

/* Tile element e of this lane: its row and column. */
static inline void cudaemu_wmma_rc(int lane, int e, int *r, int *c)
{
    int idx = e * 32 + lane;
    *r = idx / CUDAEMU_TILE;
    *c = idx % CUDAEMU_TILE;
}

template <typename T> static inline size_t cudaemu_wmma_at(int r, int c, unsigned ldm, int col)
{
    return col ? (size_t)c * ldm + r : (size_t)r * ldm + c;
}

template <typename Use, typename T, typename Layout>
static inline void cudaemu_wmma_load(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm, int col,
                                     int op, const char *name)
{
    ::cudaemu::wmma_slot s = {op, p, ldm, col, sizeof(T), nullptr, nullptr};
    ::cudaemu::wmma_begin(s, name);
    int lane = ::cudaemu::wmma_lane();
    for (int e = 0; e < f.num_elements; e++) {
        int r, c;
        cudaemu_wmma_rc(lane, e, &r, &c);
        f.x[e] = p[cudaemu_wmma_at<T>(r, c, ldm, col)];
    }
    ::cudaemu::wmma_end(name);
}

/* matrix_a or matrix_b, row- or column-major (an accumulator is loaded
 * with a layout: below). */
template <typename Use, typename T, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm)
{
    static_assert(std::is_same<Use, matrix_a>::value || std::is_same<Use, matrix_b>::value,
                  "load_matrix_sync of an accumulator takes a layout");
    const bool a = std::is_same<Use, matrix_a>::value;
    cudaemu_wmma_load(f, p, ldm, std::is_same<Layout, col_major>::value,
                      a ? ::cudaemu::WMMA_LOAD_A : ::cudaemu::WMMA_LOAD_B,
                      a ? "wmma::load_matrix_sync(matrix_a)" : "wmma::load_matrix_sync(matrix_b)");
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                                    layout_t layout)
{
    cudaemu_wmma_load(f, p, ldm, layout == mem_col_major, ::cudaemu::WMMA_LOAD_C,
                      "wmma::load_matrix_sync(accumulator)");
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                                     layout_t layout)
{
    const char *name = "wmma::store_matrix_sync";
    int col = layout == mem_col_major;
    ::cudaemu::wmma_slot s = {::cudaemu::WMMA_STORE_C, p, ldm, col, sizeof(float), nullptr, nullptr};
    ::cudaemu::wmma_begin(s, name);
    int lane = ::cudaemu::wmma_lane();
    for (int e = 0; e < f.num_elements; e++) {
        int r, c;
        cudaemu_wmma_rc(lane, e, &r, &c);
        p[cudaemu_wmma_at<float>(r, c, ldm, col)] = f.x[e];
    }
    ::cudaemu::wmma_end(name);
}

/* D = A B + C. Every lane publishes its A and B elements; after the warp
 * has met, each computes its own elements of D from the whole tiles; after
 * the warp has met again (every lane done reading), each writes them (D
 * may be C). */
/* Not instrumented for the race check (no_sanitize_thread): it reads the
 * other lanes' fragments through the stand-in's own slots, which are the
 * emulation's registers, not memory a kernel shares. */
template <typename T, typename LA, typename LB>
__attribute__((no_sanitize_thread)) static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    const char *name = "wmma::mma_sync";
    float fa[CUDAEMU_PER_LANE], fb[CUDAEMU_PER_LANE], out[CUDAEMU_PER_LANE];
    for (int e = 0; e < CUDAEMU_PER_LANE; e++) {
        fa[e] = cudaemu_wmma_f<T>(a.x[e]);
        fb[e] = cudaemu_wmma_f<T>(b.x[e]);
    }
    ::cudaemu::wmma_slot s = {::cudaemu::WMMA_MMA, nullptr, 0, 0, 0, fa, fb};
    const ::cudaemu::wmma_slot *w = ::cudaemu::wmma_begin(s, name);
    float A[16][16], B[16][16];
    for (int l = 0; l < 32; l++)
        for (int e = 0; e < CUDAEMU_PER_LANE; e++) {
            int r, cc;
            cudaemu_wmma_rc(l, e, &r, &cc);
            A[r][cc] = w[l].a[e];
            B[r][cc] = w[l].b[e];
        }
    int lane = ::cudaemu::wmma_lane();
    for (int e = 0; e < CUDAEMU_PER_LANE; e++) {
        int r, cc;
        cudaemu_wmma_rc(lane, e, &r, &cc);
        float acc = c.x[e];
        for (int q = 0; q < 16; q++) acc += A[r][q] * B[q][cc]; /* the product is exact in fp32 */
        out[e] = acc;
    }
    ::cudaemu::wmma_end(name);
    for (int e = 0; e < CUDAEMU_PER_LANE; e++) d.x[e] = out[e];
}

} // namespace wmma
} // namespace nvcuda

#endif
