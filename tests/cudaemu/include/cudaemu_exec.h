/* cudaemu's execution model (C++): what a .cu file sees of the device.
 *
 * A launch, CUDAEMU_LAUNCH(kernel, grid, block, shared, stream, args...)
 * (what src/backend/cuda's CUDA_LAUNCH expands to here; <<<...>>> under
 * nvcc), checks the configuration as the driver does (a bad one sets
 * cudaErrorInvalidConfiguration and runs nothing), checks every pointer
 * argument against the device allocations, runs the grid, and then checks
 * the guard zones of every allocation. Blocks run in parallel on OpenMP
 * threads; the threads of a block are fibers on one OS thread that switch
 * only at __syncthreads() and the warp intrinsics, in a fixed order, so a
 * run is deterministic.
 *
 * Shared memory: static __shared__ arrays are thread_local (one per OS
 * thread, so one per running block; like the hardware's, they start with
 * whatever the last block left); dynamic shared memory (CUDA_DYN_SHARED)
 * is filled with the NaN pattern at the start of every block. */
#ifndef CUDAEMU_EXEC_H
#define CUDAEMU_EXEC_H

#include "cuda_runtime_api.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ thread_local
#define __restrict__ __restrict
#define warpSize 32

namespace cudaemu {

struct block_state;

/* One emulated thread of the running block. */
struct ethread {
    uint3 tid;
    block_state *blk;
};

/* What every thread of a block shares. */
struct block_state {
    uint3 bidx;
    dim3 bdim, gdim;
};

/* The thread running on this OS thread (NULL outside a kernel). */
extern __thread ethread *t_cur;

/* A kernel's body for one thread: fn(closure). */
typedef void (*body_fn)(void *closure);

/* Runs the grid (the launch's checks done). ptrs[i] is argument i when it
 * is a pointer (else NULL), for naming it in a guard-zone report. */
void run_grid(const char *kernel, const char *argtext, body_fn fn, void *closure, dim3 grid, dim3 block,
              size_t shared, const void *const *ptrs, int nargs);
/* Checks the launch configuration; sets the last error and returns 0 when
 * the driver would refuse it. */
int launch_ok(const char *kernel, dim3 grid, dim3 block, size_t shared, cudaStream_t stream);
/* Checks argument i (a pointer) of a kernel: NULL or inside a live device
 * allocation; stops the run otherwise. */
void check_arg(const char *kernel, const char *argtext, int i, const void *p);
/* Takes this thread's table declarations (cudaemu_annotate_table) for the
 * launch: each table must be one of the pointer arguments ptrs[], and each
 * entry's extent must lie inside the tensor its pointer points into; stops
 * the run otherwise. */
void take_tables(const char *kernel, const char *argtext, const void *const *ptrs, int nargs);

/* The block's dynamic shared memory. */
void *dyn_shared(void);
/* Device side of __syncthreads and of the warp intrinsics. */
void syncthreads(void);
enum shfl_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR, SHFL_SYNCWARP, SHFL_BALLOT, SHFL_WMMA /* mma.h's collectives */,
                 SHFL_COLLECTIVE };
uint64_t warp_op(shfl_kind kind, unsigned mask, uint64_t v, int arg, int width, const char *name);

/* A warp-synchronous point, for emulating a warp-collective call (WMMA's
 * load_matrix_sync, mma_sync, store_matrix_sync, ...): the calling lane
 * waits until every lane of `mask` has called it with the same mask (a
 * lane outside the mask, or one that never calls, stops the run as for a
 * shuffle), and the race detector then treats it as ordering the lanes of
 * the mask: what each lane wrote before the call is visible to every lane
 * of the mask after it. `name` names the call in reports. Call it where the
 * real call synchronises the warp: before the fragment's shared or global
 * memory is read (load) and after it is written (store), e.g.
 *   warp_collective(0xffffffffu, "wmma::load_matrix_sync"); then read.
 * It returns nothing and exchanges nothing. */
void warp_collective(unsigned mask, const char *name);

template <typename T> static inline T shfl(shfl_kind kind, unsigned mask, T v, int arg, int width, const char *name)
{
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    u = warp_op(kind, mask, u, arg, width, name);
    T r;
    memcpy(&r, &u, sizeof r);
    return r;
}

template <typename K, typename... P> struct closure {
    K k;
    std::tuple<P...> args;
    static void invoke(void *c)
    {
        closure *cl = (closure *)c;
        std::apply(cl->k, cl->args); /* each thread gets its own copies of the parameters */
    }
};

template <typename T> static inline const void *ptr_of(const T &v)
{
    if constexpr (std::is_pointer<T>::value) return (const void *)v;
    else return nullptr;
}

template <typename... P, typename... A, size_t... I>
static void launch_impl(const char *kname, const char *argtext, void (*k)(P...), dim3 grid, dim3 block,
                        size_t shared, cudaStream_t stream, std::index_sequence<I...>, A &&...a)
{
    typedef closure<void (*)(P...), typename std::decay<P>::type...> cl_t;
    cl_t cl{k, std::tuple<typename std::decay<P>::type...>(static_cast<typename std::decay<P>::type>(std::forward<A>(a))...)};
    const void *ptrs[sizeof...(P) + 1] = {ptr_of(std::get<I>(cl.args))..., nullptr};
    take_tables(kname, argtext, ptrs, (int)sizeof...(P));
    if (!launch_ok(kname, grid, block, shared, stream)) return;
    for (size_t i = 0; i < sizeof...(P); i++)
        if (ptrs[i]) check_arg(kname, argtext, (int)i, ptrs[i]);
    run_grid(kname, argtext, &cl_t::invoke, &cl, grid, block, shared, ptrs, (int)sizeof...(P));
}

template <typename... P, typename... A>
static void launch(const char *kname, const char *argtext, void (*k)(P...), dim3 grid, dim3 block, size_t shared,
                   cudaStream_t stream, A &&...a)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    launch_impl(kname, argtext, k, grid, block, shared, stream, std::index_sequence_for<P...>{},
                std::forward<A>(a)...);
}

} // namespace cudaemu

#define CUDAEMU_LAUNCH(k, grid, block, shared, stream, ...)                                                    \
    ::cudaemu::launch(#k, #__VA_ARGS__, k, grid, block, shared, stream, __VA_ARGS__)
#define CUDAEMU_DYN_SHARED(type, name) type *const name = (type *)::cudaemu::dyn_shared()
/* The bytes [p, p + bytes) of a device allocation are one tensor, `name`
 * (a string the stand-in copies): the race check (docs/cudaemu.md) then
 * holds a kernel to the tensors its arguments point into, and reports an
 * access past one, with the kernel and the tensor, even where the next
 * byte belongs to another tensor of the same allocation. A later
 * annotation replaces every earlier one it overlaps. src/backend/cuda
 * calls it where it carves tensors out of larger allocations; under nvcc
 * it is nothing. */
#define CUDAEMU_ANNOTATE_SUBBUFFER(p, bytes, name) cudaemu_annotate_subbuffer((p), (bytes), (name))
/* The next launch reaches tensors through a table in device memory: `tab`
 * (one of its arguments) holds `count` entries of `type`, and each entry's
 * pointer `field` points to `nfield` (an int64_t field of the entry)
 * elements of `elem` bytes. One call per pointer field; under nvcc it is
 * nothing. The launch checks every entry against its tensor, and the race
 * check then knows the entries' extents as the kernel's tensors (cudaemu.h,
 * cudaemu_annotate_table). */
#define CUDAEMU_ANNOTATE_TABLE(tab, count, type, field, nfield, elem)                                          \
    do {                                                                                                       \
        static_assert(sizeof(((type *)0)->nfield) == sizeof(int64_t), #type "." #nfield " must be an int64_t"); \
        cudaemu_annotate_table((tab), (count), sizeof(type), offsetof(type, field), offsetof(type, nfield), (elem), \
                               #type "." #field);                                                             \
    } while (0)

#define threadIdx (::cudaemu::t_cur->tid)
#define blockIdx (::cudaemu::t_cur->blk->bidx)
#define blockDim (::cudaemu::t_cur->blk->bdim)
#define gridDim (::cudaemu::t_cur->blk->gdim)

static inline void __syncthreads(void) { ::cudaemu::syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    ::cudaemu::warp_op(::cudaemu::SHFL_SYNCWARP, mask, 0, 0, 32, "__syncwarp");
}
static inline unsigned __ballot_sync(unsigned mask, int pred)
{
    return (unsigned)::cudaemu::warp_op(::cudaemu::SHFL_BALLOT, mask, pred != 0, 0, 32, "__ballot_sync");
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    return ::cudaemu::shfl(::cudaemu::SHFL_IDX, mask, v, src, width, "__shfl_sync");
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32)
{
    return ::cudaemu::shfl(::cudaemu::SHFL_UP, mask, v, (int)d, width, "__shfl_up_sync");
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32)
{
    return ::cudaemu::shfl(::cudaemu::SHFL_DOWN, mask, v, (int)d, width, "__shfl_down_sync");
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32)
{
    return ::cudaemu::shfl(::cudaemu::SHFL_XOR, mask, v, m, width, "__shfl_xor_sync");
}

/* Device math: the _rn intrinsics are single IEEE operations (the emulated
 * module is compiled with -ffp-contract=off, so nothing else fuses either);
 * expf, erff, sqrtf, ... (and __expf, __logf: glibc has them) are the host's libm (nvcc's differ by an ulp or
 * two: docs/cudaemu.md). */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
namespace cudaemu {
template <typename To, typename From> static inline To bits(From x)
{
    static_assert(sizeof(To) == sizeof(From), "bit cast between sizes");
    To t;
    memcpy(&t, &x, sizeof t);
    return t;
}
} // namespace cudaemu
static inline unsigned __float_as_uint(float x) { return ::cudaemu::bits<unsigned>(x); }
static inline float __uint_as_float(unsigned u) { return ::cudaemu::bits<float>(u); }
static inline int __float_as_int(float x) { return ::cudaemu::bits<int>(x); }
static inline float __int_as_float(int u) { return ::cudaemu::bits<float>(u); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }

#endif
