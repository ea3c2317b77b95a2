/* test_cudaemu_mma: cudaemu's WMMA fragments (include/mma.h,
 * cudaemu_mma.cc).
 *
 * 1. Products: 16 x 16 x 16 tiles in fp16 and bf16, A and B row- and
 *    column-major, the accumulator loaded and stored both ways, a k loop
 *    of three tiles with D = C in place, two warps of a block each on its
 *    own tile, a tile staged through shared memory: against a double loop
 *    on the same 16-bit inputs (the fp32 sums within 1e-6 of the
 *    magnitude). fill_fragment and an elementwise scale of x[].
 * 2. Planted faults, each in a child process; each must stop the run with
 *    the kernel, the block and the lane named: a lane that returns before
 *    mma_sync, a lane at __syncthreads() instead of load_matrix_sync, lanes
 *    with different pointers, lanes calling different loads, a pointer not
 *    32-byte aligned, a leading dimension not a multiple of 16 bytes, a tile
 *    past its allocation, a block whose last warp is short, a store from
 *    half a warp (lanes 16-31 return before it).
 * Prints every comparison; exits 1 when one fails. */
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "emu_check.h"
#include "mma.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace nvcuda;

static uint32_t rng = 2024;

template <typename T> static T to16(float v);
template <> __half to16<__half>(float v) { return __float2half_rn(v); }
template <> __nv_bfloat16 to16<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
static float f32(__half v) { return __half2float(v); }
static float f32(__nv_bfloat16 v) { return __bfloat162float(v); }

/* ------------------------------------------------------------------------
 * Products. */

/* Each warp w: D_w = sum over kt < ktiles of A_w[:, kt] B_w[kt, :] + C_w,
 * the tiles at A + w * sa etc.; D written over C (in place) when inplace. */
template <typename T, typename LA, typename LB>
__global__ void mma_kernel(float *D, const T *A, const T *B, const float *C, int lda, int ldb, int ldc, int ldd,
                           long long sa, long long sb, long long sc, long long sd, int ktiles, int ccol, int dcol,
                           float scale)
{
    int w = (int)(threadIdx.x / 32);
    const bool acol = std::is_same<LA, wmma::col_major>::value, bcol = std::is_same<LB, wmma::col_major>::value;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C + w * sc, ldc, ccol ? wmma::mem_col_major : wmma::mem_row_major);
    for (int kt = 0; kt < ktiles; kt++) {
        /* tile kt of A's columns and B's rows */
        wmma::load_matrix_sync(fa, A + w * sa + (acol ? (size_t)kt * 16 * lda : (size_t)kt * 16), lda);
        wmma::load_matrix_sync(fb, B + w * sb + (bcol ? (size_t)kt * 16 : (size_t)kt * 16 * ldb), ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= scale;
    wmma::store_matrix_sync(D + w * sd, acc, ldd, dcol ? wmma::mem_col_major : wmma::mem_row_major);
}

/* A and B staged through dynamic shared memory (as the attention kernels
 * do): the block copies, a barrier, then one warp multiplies; C filled. */
template <typename T>
__global__ void mma_shared_kernel(float *D, const T *A, const T *B, float cfill)
{
    CUDAEMU_DYN_SHARED(unsigned char, raw);
    /* dynamic shared memory is only 16-byte aligned for sure; WMMA wants 32 */
    T *sa = (T *)(((uintptr_t)raw + 31) & ~(uintptr_t)31), *sb = sa + 256;
    for (int i = (int)threadIdx.x; i < 256; i += (int)blockDim.x) {
        sa[i] = A[i];
        sb[i] = B[i];
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, cfill);
        wmma::load_matrix_sync(fa, sa, 16);
        wmma::load_matrix_sync(fb, sb, 16);
        wmma::mma_sync(acc, fa, fb, acc);
        wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
    }
}

struct mma_case {
    int acol, bcol, ccol, dcol, ktiles, warps, pad, inplace;
    float scale;
};

template <typename T, typename LA, typename LB> static void run_case(const mma_case &c, const char *tname)
{
    int K = 16 * c.ktiles;
    /* A is 16 x K, B is K x 16, C and D 16 x 16 per warp; each with pad
     * extra (a multiple of 16 bytes) in its leading dimension */
    int lda = (c.acol ? 16 : K) + c.pad, ldb = (c.bcol ? K : 16) + c.pad, ldc = 16 + c.pad, ldd = 16 + c.pad;
    long long sa = (long long)lda * (c.acol ? K : 16), sb = (long long)ldb * (c.bcol ? 16 : K), sc = 16LL * ldc,
              sd = 16LL * ldd;
    std::vector<T> ha(sa * c.warps), hb(sb * c.warps);
    std::vector<float> hc(sc * c.warps);
    for (T &x : ha) x = to16<T>(emu_frand(&rng));
    for (T &x : hb) x = to16<T>(emu_frand(&rng));
    for (float &x : hc) x = emu_frand(&rng);
    T *A = emu_upload(ha), *B = emu_upload(hb);
    float *C = emu_upload(hc), *D = c.inplace ? C : emu_upload(std::vector<float>(sd * c.warps, 777.0f));
    CUDAEMU_LAUNCH((mma_kernel<T, LA, LB>), 1, 32 * c.warps, 0, 0, D, A, B, C, lda, ldb, ldc, ldd, sa, sb, sc, sd,
                   c.ktiles, c.ccol, c.dcol, c.scale);
    cudaError_t e = cudaDeviceSynchronize();
    std::vector<float> out = emu_download(D, (size_t)sd * c.warps);
    double worst = 0;
    for (int w = 0; w < c.warps; w++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double cv = hc[w * sc + (c.ccol ? (size_t)j * ldc + i : (size_t)i * ldc + j)], sum = cv,
                       mag = fabs(cv);
                for (int q = 0; q < K; q++) {
                    double a = f32(ha[w * sa + (c.acol ? (size_t)q * lda + i : (size_t)i * lda + q)]);
                    double b = f32(hb[w * sb + (c.bcol ? (size_t)j * ldb + q : (size_t)q * ldb + j)]);
                    sum += a * b;
                    mag += fabs(a * b);
                }
                double got = out[w * sd + (c.dcol ? (size_t)j * ldd + i : (size_t)i * ldd + j)];
                double err = fabs(got - c.scale * sum) / (fabs(c.scale) * mag + 1e-30);
                worst = std::isnan(err) ? INFINITY : std::max(worst, err);
            }
    check(e == cudaSuccess && worst <= 1e-6,
          "wmma %s A %s B %s, C loaded %s, D stored %s, k %d, %d warp(s), ld +%d%s, x[] scaled by %g: max rel err "
          "%.2e",
          tname, c.acol ? "col" : "row", c.bcol ? "col" : "row", c.ccol ? "col" : "row", c.dcol ? "col" : "row", K,
          c.warps, c.pad, c.inplace ? ", D = C" : "", c.scale, worst);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    if (!c.inplace) cudaFree(D);
}

template <typename T> static void run_all(const char *tname)
{
    const mma_case cases[] = {
        /* acol bcol ccol dcol ktiles warps pad inplace scale */
        {0, 0, 0, 0, 1, 1, 0, 0, 1.0f}, {0, 1, 0, 1, 1, 1, 0, 0, 1.0f}, {1, 0, 1, 0, 1, 1, 8, 0, 1.0f},
        {1, 1, 1, 1, 1, 1, 0, 0, 1.0f}, {0, 1, 0, 0, 3, 1, 16, 1, 0.125f}, {1, 0, 1, 1, 2, 2, 8, 0, -2.0f},
    };
    for (const mma_case &c : cases) {
        if (!c.acol && !c.bcol) run_case<T, wmma::row_major, wmma::row_major>(c, tname);
        else if (!c.acol) run_case<T, wmma::row_major, wmma::col_major>(c, tname);
        else if (!c.bcol) run_case<T, wmma::col_major, wmma::row_major>(c, tname);
        else run_case<T, wmma::col_major, wmma::col_major>(c, tname);
    }
    /* through shared memory */
    std::vector<T> ha(256), hb(256);
    for (T &x : ha) x = to16<T>(emu_frand(&rng));
    for (T &x : hb) x = to16<T>(emu_frand(&rng));
    T *A = emu_upload(ha), *B = emu_upload(hb);
    float *D = emu_upload(std::vector<float>(256, 777.0f));
    CUDAEMU_LAUNCH(mma_shared_kernel<T>, 1, 96, 1024 + 32, 0, D, A, B, 0.5f);
    std::vector<float> out = emu_download(D, 256);
    double worst = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            double sum = 0.5, mag = 0.5;
            for (int q = 0; q < 16; q++) {
                double p = (double)f32(ha[i * 16 + q]) * f32(hb[j * 16 + q]);
                sum += p;
                mag += fabs(p);
            }
            worst = std::max(worst, fabs(out[i * 16 + j] - sum) / mag);
        }
    check(worst <= 1e-6, "wmma %s through shared memory (3 warps copy, a barrier, warp 0 multiplies), C filled 0.5: max "
          "rel err %.2e", tname, worst);
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
}

/* ------------------------------------------------------------------------
 * Planted faults. */

/* mode: what goes wrong in the one warp's load-load-mma-store. */
enum { F_RETURN, F_BARRIER, F_POINTER, F_OTHER_LOAD, F_ALIGN, F_LDM, F_PAST_END, F_SHORT_WARP, F_HALF_STORE };

__global__ void fault_kernel(float *D, const __half *A, const __half *B, int mode)
{
    int lane = (int)(threadIdx.x % 32);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    const __half *pa = A;
    unsigned lda = 16;
    if (mode == F_POINTER && lane == 9) pa = A + 16;
    if (mode == F_ALIGN) pa = A + 1;
    if (mode == F_LDM) lda = 20;
    if (mode == F_PAST_END) pa = A + 16;
    if (mode == F_BARRIER && lane == 7) {
        __syncthreads();
        return;
    }
    if (mode == F_OTHER_LOAD && lane >= 16) wmma::load_matrix_sync(fb, B, 16);
    else wmma::load_matrix_sync(fa, pa, lda);
    wmma::load_matrix_sync(fb, B, 16);
    if (mode == F_RETURN && lane == 5) return;
    wmma::mma_sync(acc, fa, fb, acc);
    if (mode == F_HALF_STORE && lane >= 16) return; /* a store under `if (lane < 16)` */
    wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
    if (mode == F_BARRIER) __syncthreads();
}

static int fault_mode;

static void run_fault(void)
{
    __half *A = emu_upload(std::vector<__half>(256, __float2half_rn(1.0f)));
    __half *B = emu_upload(std::vector<__half>(256, __float2half_rn(1.0f)));
    float *D = emu_upload(std::vector<float>(256, 0.0f));
    CUDAEMU_LAUNCH(fault_kernel, 1, fault_mode == F_SHORT_WARP ? 48 : 32, 0, 0, D, A, B, fault_mode);
    exit(0);
}

static void planted(const char *what, int mode, const char *want1, const char *want2)
{
    std::string err;
    fault_mode = mode; /* the child's copy */
    int st = emu_child(run_fault, &err);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    int ok = st == 70 && err.find("kernel fault_kernel, block (0,0,0)") != std::string::npos &&
             (!want1 || err.find(want1) != std::string::npos) && (!want2 || err.find(want2) != std::string::npos);
    check(ok, "planted fault caught: %s (exit %d): %s", what, st, err.c_str());
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the children fork before this process runs any OpenMP region */
    planted("lane 5 returns before mma_sync", F_RETURN, "wmma::mma_sync with mask 0xffffffff, but lane 5",
            "never calls it: it has returned");
    planted("lane 7 waits at __syncthreads() instead of load_matrix_sync", F_BARRIER,
            "wmma::load_matrix_sync(matrix_a) with mask 0xffffffff, but lane 7", "waits at __syncthreads()");
    planted("lane 9 passes another pointer", F_POINTER, "but lane 9 (", "must be the same in every lane");
    planted("lanes 16-31 load matrix_b while 0-15 load matrix_a", F_OTHER_LOAD, "while lane",
            "must make the same WMMA call");
    planted("a pointer 2 bytes past 32-byte alignment", F_ALIGN, "is not 32-byte (256-bit) aligned", NULL);
    planted("a leading dimension of 20 halves (40 bytes)", F_LDM, "is not a multiple of 16 bytes", NULL);
    planted("a tile past the end of its allocation", F_PAST_END, "the tile reaches", "past the end");
    planted("a block of 48 threads (the second warp has 16 lanes)", F_SHORT_WARP, "names lane 16, which does not exist",
            NULL);
    planted("lanes 16-31 skip store_matrix_sync (a store from half a warp)", F_HALF_STORE,
            "wmma::store_matrix_sync with mask 0xffffffff, but lane 16", "never calls it: it has returned");
    run_all<__half>("fp16");
    run_all<__nv_bfloat16>("bf16");
    return check_summary();
}
