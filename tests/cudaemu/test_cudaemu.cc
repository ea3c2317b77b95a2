/* test_cudaemu: the CPU stand-in's own checks (tests/cudaemu).
 *
 * 1. What it emulates: fp16/bf16 conversions (round to nearest even,
 *    overflow to inf, subnormals, NaN), the execution model (a barrier makes
 *    shared-memory writes visible; warp shuffles; a block reduction as
 *    bertc's kernels write it), the NaN fill of new device memory, the
 *    memory cap, launch-configuration errors, the emulated card's name.
 * 2. The self-test: copies of bertc's kernels with a bug planted, each run
 *    in a child process; each must be caught: a barrier removed (the result
 *    is wrong), an index off by one (a guard zone written: the run stops),
 *    a shuffle in divergent code, a barrier in divergent code, a host
 *    pointer and a freed pointer passed to a kernel, a table entry (in
 *    device memory, CUDAEMU_ANNOTATE_TABLE) whose n reaches past its tensor
 *    (each stops the run naming the kernel, and the block and thread or the
 *    argument). The racecheck build adds the race detector's own planted
 *    faults (docs/cudaemu.md lists them).
 * Prints every comparison; exits 1 when one fails. */
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "emu_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------------------
 * Conversions. */

struct conversion {
    float in;
    uint16_t want;
};

/* The table's conversions that miss, each printed. */
static int conversion_misses(const char *name, uint16_t (*f2bits)(float), const conversion *c, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t got = f2bits(c[i].in);
        if (got != c[i].want) {
            bad++;
            printf("  %s(%.9g = %a) = 0x%04x, want 0x%04x\n", name, c[i].in, c[i].in, got, c[i].want);
        }
    }
    return bad;
}

static void conversions(void)
{
    const conversion h[] = {
        {1.0f, 0x3c00},
        {65504.0f, 0x7bff},
        {65519.996f, 0x7bff}, /* below the halfway point to 65536: the largest half */
        {65520.0f, 0x7c00},   /* the halfway point rounds to even: inf */
        {1e6f, 0x7c00},
        {-1e6f, 0xfc00},
        {bits_f(0x7f800000u), 0x7c00},
        {1.0f + 1.0f / 2048, 0x3c00},       /* a tie: to even (down) */
        {1.0f + 3.0f / 2048, 0x3c02},       /* a tie: to even (up) */
        {6.103515625e-05f, 0x0400},         /* 2^-14, the smallest normal */
        {5.9604645e-08f, 0x0001},           /* 2^-24, the smallest subnormal */
        {2.9802322e-08f, 0x0000},           /* 2^-25: a tie, to even (zero) */
        {4.4703484e-08f, 0x0001},           /* 1.5 * 2^-25 rounds up */
        {-0.0f, 0x8000},
        {bits_f(0x7fc00001u), 0x7fff},      /* NaN */
    };
    check(!conversion_misses("half", [](float f) { return (uint16_t)__float2half_rn(f).__x; }, h, sizeof h / sizeof h[0]),
          "fp16: %zu conversions (ties to even, 65520 -> inf, subnormals, NaN)", sizeof h / sizeof h[0]);
    /* every half converts back to the float that converts to it */
    int rt = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        __half x;
        x.__x = (uint16_t)u;
        float f = __half2float(x);
        if (isnan(f)) continue;
        if (__float2half_rn(f).__x != u) rt++;
    }
    check(!rt, "fp16: all 65536 halves round-trip through float (%d differ)", rt);
    const conversion b[] = {
        {1.0f, 0x3f80},
        {bits_f(0x3f808000u), 0x3f80}, /* a tie: to even (down) */
        {bits_f(0x3f818000u), 0x3f82}, /* a tie: to even (up) */
        {bits_f(0x3f808001u), 0x3f81},
        {bits_f(0x7f7fffffu), 0x7f80}, /* FLT_MAX rounds to inf */
        {bits_f(0x7fc00000u), 0x7fff},
    };
    check(!conversion_misses("bf16", [](float f) { return (uint16_t)__float2bfloat16_rn(f).__x; }, b, sizeof b / sizeof b[0]),
          "bf16: %zu conversions (ties to even, overflow to inf, NaN)", sizeof b / sizeof b[0]);
    check(cudaemu_round_tf32(bits_f(0x3f801000u)) == 1.0f && cudaemu_round_tf32(bits_f(0x3f803000u)) == bits_f(0x3f804000u),
          "tf32: rounds to 10 mantissa bits, ties to even");
}

/* ------------------------------------------------------------------------
 * Kernels: good ones, and copies with bugs. */

#define NT 128

/* bertc's cuda_block_sum (src/backend/cuda/cuda_internal.h). */
template <int N> static float block_sum(float v, float *sh, int drop_barrier)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    if (!drop_barrier) __syncthreads(); /* the planted bug drops this one */
    float s = 0;
    for (int i = 0; i < N / 32; i++) s += sh[i];
    return s;
}

/* One block per row: out[row] = sum of the row (bertc's row reductions). */
__global__ void row_sum_kernel(float *out, const float *x, int n, int drop_barrier)
{
    __shared__ float sh[NT / 32];
    const float *r = x + (size_t)blockIdx.x * n;
    float s = 0;
    for (int j = threadIdx.x; j < n; j += NT) s += r[j];
    s = block_sum<NT>(s, sh, drop_barrier);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

/* bertc's add_kernel (cuda_dense.cu); off_by_one runs i <= n. */
__global__ void add_kernel(float *out, const float *a, const float *b, size_t n, int off_by_one)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n + (off_by_one ? 1 : 0);
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __fadd_rn(a[i], b[i]);
}

/* bertc's warp_sum (cuda_dense.cu's layernorm); divergent puts it under a lane test. */
__global__ void warp_sum_kernel(float *out, const float *x, int divergent)
{
    float v = x[threadIdx.x];
    int lane = threadIdx.x % 32;
    if (!divergent || lane < 16)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) out[threadIdx.x / 32] = v;
}

/* A barrier inside an early return, as a kernel with `if (i >= n) return;`
 * before its __syncthreads() would have. */
__global__ void early_return_kernel(float *out, int n)
{
    __shared__ float sh[NT];
    int i = threadIdx.x;
    if (i >= n) return;
    sh[i] = (float)i;
    __syncthreads();
    out[i] = sh[(i + 1) % n];
}

/* Shared memory through a barrier: each thread reads its neighbour's write. */
__global__ void neighbour_kernel(float *out, int with_barrier)
{
    __shared__ float sh[NT];
    sh[threadIdx.x] = -1.0f;
    __syncthreads();
    sh[threadIdx.x] = (float)threadIdx.x;
    if (with_barrier) __syncthreads();
    out[threadIdx.x] = sh[(threadIdx.x + 1) % NT];
}

__global__ void shfl_kinds_kernel(int *out)
{
    int l = threadIdx.x % 32;
    out[threadIdx.x * 4 + 0] = __shfl_sync(0xffffffffu, l * 10, 3);
    out[threadIdx.x * 4 + 1] = __shfl_up_sync(0xffffffffu, l * 10, 2);
    out[threadIdx.x * 4 + 2] = __shfl_down_sync(0xffffffffu, l * 10, 5);
    out[threadIdx.x * 4 + 3] = (int)__ballot_sync(0xffffffffu, l & 1);
}

/* A loop over shared-memory tiles (bertc's tiled kernels): each thread
 * loads its element of tile k, then reads its neighbour's; drop_barrier
 * removes the barrier that keeps tile k + 1's loads from overwriting tile
 * k while others still read it. */
__global__ void tile_loop_kernel(float *out, const float *x, int ntiles, int drop_barrier)
{
    __shared__ float tile[NT];
    float acc = 0;
    for (int k = 0; k < ntiles; k++) {
        tile[threadIdx.x] = x[(size_t)k * NT + threadIdx.x];
        __syncthreads();
        acc += tile[(threadIdx.x + 1) % NT];
        if (!drop_barrier) __syncthreads(); /* the planted bug drops this one */
    }
    out[blockIdx.x * NT + threadIdx.x] = acc;
}

/* Lane 0 of each warp publishes a value that the next warp reads. */
__global__ void warp_publish_kernel(float *out, int with_barrier)
{
    __shared__ float v[NT / 32];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x < NT / 32) v[threadIdx.x] = -1.0f;
    __syncthreads();
    if (lane == 0) v[w] = (float)w;
    if (with_barrier) __syncthreads();
    out[threadIdx.x] = v[(w + 1) % (NT / 32)];
}

/* Each block copies x to y, then reads the next block's y (a planted
 * dependence between blocks of one launch). */
__global__ void next_block_kernel(float *z, float *y, const float *x)
{
    size_t i = (size_t)blockIdx.x * NT + threadIdx.x;
    y[i] = x[i];
    z[i] = y[((size_t)(blockIdx.x + 1) % gridDim.x) * NT + threadIdx.x];
}

/* Each lane takes lane + 1's value through a shuffle and then reads what
 * lane + 1 stored in shared memory: ordered when the store comes before
 * the shuffle, a race when after. */
__global__ void shfl_store_kernel(float *out, int store_after)
{
    __shared__ float sh[NT];
    sh[threadIdx.x] = 0.0f;
    __syncthreads();
    int lane = threadIdx.x % 32, src = (threadIdx.x & ~31u) + (lane + 1) % 32;
    if (!store_after) sh[threadIdx.x] = (float)threadIdx.x;
    float v = __shfl_sync(0xffffffffu, (float)lane, (lane + 1) % 32);
    if (store_after) sh[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = v + sh[src];
}

/* GELU-shaped: out[i] = f(inp[i]) for i < n + extra_out, reading inp up to
 * n + extra_in (the planted bugs: one float past a tensor). */
__global__ void gelu_like_kernel(float *out, const float *inp, int n, int extra_out, int extra_in)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra_out) out[i] = 0.5f * inp[i < n ? i : (extra_in ? i : n - 1)];
}

/* fused_residual_ln_bwd_kernel's column sums (cuda_fused.cu): each warp
 * adds its rows per column into its own row of dynamic shared memory (a
 * lane only its own columns), then the block adds the warps' rows in
 * order; drop_barrier removes the barrier between the two. */
__global__ void ln_colsum_kernel(float *part, const float *x, int rows, int C, int drop_barrier)
{
    CUDAEMU_DYN_SHARED(float, acc); /* [NT / 32][C] */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *aw = acc + (size_t)warp * C;
    for (int c = lane; c < C; c += 32) aw[c] = 0.0f;
    for (int row = warp; row < rows; row += NT / 32)
        for (int c = lane; c < C; c += 32) aw[c] += x[(size_t)row * C + c];
    if (!drop_barrier) __syncthreads(); /* the planted bug drops this one */
    for (int c = threadIdx.x; c < C; c += NT) {
        float sum = 0;
        for (int j = 0; j < NT / 32; j++) sum += acc[(size_t)j * C + c];
        part[(size_t)blockIdx.x * C + c] = sum;
    }
}

/* A table of tensors in device memory, as cuda_fused.cu's multi-tensor
 * AdamW reaches its parameters: a block per entry doubles its n floats.
 * The launch declares the entries (CUDAEMU_ANNOTATE_TABLE). */
struct table_entry {
    float *x;
    int64_t n;
};

__global__ void table_scale_kernel(const table_entry *tab, int ntens, int extra)
{
    if ((int)blockIdx.x >= ntens) return;
    const table_entry *e = tab + blockIdx.x;
    for (int64_t i = threadIdx.x; i < e->n + extra; i += NT) e->x[i] = 2.0f * e->x[i];
}

/* ------------------------------------------------------------------------ */

static float *dev(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(2);
    }
    return (float *)p;
}

/* n floats of device memory, set to 0. */
static float *dev0(size_t n)
{
    float *p = dev(n);
    cudaMemset(p, 0, n * sizeof(float));
    return p;
}

static void up(float *d, const float *h, size_t n)
{
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
}

static void down(float *h, const float *d, size_t n)
{
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
}

/* The row sums of a rows x n matrix on the device; 0 when they match the host's. */
static int row_sums(int drop_barrier, double *maxerr)
{
    const int rows = 64, n = 300;
    float *h = (float *)malloc(sizeof(float) * rows * n), got[64];
    double want[64];
    uint64_t s = 1;
    for (int r = 0; r < rows; r++) {
        want[r] = 0;
        for (int j = 0; j < n; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            h[r * n + j] = (float)((s >> 40) % 1000) / 1000.0f;
            want[r] += h[r * n + j];
        }
    }
    float *x = dev((size_t)rows * n), *o = dev(rows);
    up(x, h, (size_t)rows * n);
    CUDAEMU_LAUNCH(row_sum_kernel, rows, NT, 0, 0, o, x, n, drop_barrier);
    down(got, o, rows);
    *maxerr = 0;
    for (int r = 0; r < rows; r++) {
        double e = fabs(got[r] - want[r]) / want[r];
        if (!(e <= *maxerr)) *maxerr = isnan(e) ? INFINITY : e;
    }
    cudaFree(x);
    cudaFree(o);
    free(h);
    return *maxerr > 1e-5;
}

#ifndef CUDAEMU_RACECHECK
static void pair_orders(void);
#endif

static void model(void)
{
    double err;
    int bad = row_sums(0, &err);
    check(!bad, "execution model: 64 block reductions (shuffles, two barriers) match the host, max rel err %.2g", err);

    float *o = dev(NT), h[NT];
    CUDAEMU_LAUNCH(neighbour_kernel, 1, NT, 0, 0, o, 1);
    down(h, o, NT);
    int ok = 1;
    for (int i = 0; i < NT; i++) ok &= h[i] == (float)((i + 1) % NT);
    check(ok, "execution model: after __syncthreads() every thread sees its neighbour's write");
#ifndef CUDAEMU_RACECHECK /* a race: the racecheck build stops on it (its planted faults) */
    CUDAEMU_LAUNCH(neighbour_kernel, 1, NT, 0, 0, o, 0);
    down(h, o, NT);
    int stale = 0;
    for (int i = 0; i < NT; i++) stale += h[i] == -1.0f;
    check(stale > 0, "execution model: without the barrier %d of %d threads read the value from before it", stale, NT);
    pair_orders();
#endif

    int *io = NULL;
    cudaMalloc((void **)&io, 64 * 4 * sizeof(int));
    CUDAEMU_LAUNCH(shfl_kinds_kernel, 1, 64, 0, 0, io);
    int hi[256];
    cudaMemcpy(hi, io, sizeof hi, cudaMemcpyDeviceToHost);
    ok = 1;
    for (int t = 0; t < 64; t++) {
        int l = t % 32;
        ok &= hi[t * 4] == 30 && hi[t * 4 + 1] == (l >= 2 ? (l - 2) * 10 : l * 10) &&
              hi[t * 4 + 2] == (l + 5 < 32 ? (l + 5) * 10 : l * 10) && (unsigned)hi[t * 4 + 3] == 0xaaaaaaaau;
    }
    check(ok, "warp intrinsics: __shfl_sync, __shfl_up_sync, __shfl_down_sync, __ballot_sync in two warps");
    cudaFree(io);

    /* new memory is the NaN pattern */
    float *n = dev(16);
    down(h, n, 16);
    int nans = 0;
    for (int i = 0; i < 16; i++) nans += isnan(h[i]);
    check(nans == 16, "new device memory reads as NaN (%d of 16)", nans);
    cudaFree(n);
    cudaFree(o);

    /* a launch the driver refuses runs nothing and sets the error */
    cudaGetLastError();
    float *a = dev(4);
    CUDAEMU_LAUNCH(add_kernel, 1, 2048, 0, 0, a, a, a, (size_t)4, 0);
    cudaError_t e1 = cudaGetLastError();
    CUDAEMU_LAUNCH(add_kernel, 1, 32, 64 * 1024, 0, a, a, a, (size_t)4, 0);
    cudaError_t e2 = cudaGetLastError();
    check(e1 == cudaErrorInvalidConfiguration && e2 == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess,
          "launch checks: 2048 threads a block and 64 KiB of shared memory are refused (%s), the error clears",
          cudaGetErrorString(e1));
    cudaFree(a);

    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    check(strstr(prop.name, "emulated") != NULL, "the card's name says it is emulated: \"%s\"", prop.name);
}

/* The memory cap: run in a child with CUDAEMU_MEM_LIMIT set. */
static void mem_cap(void)
{
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    void *p = NULL, *q = NULL;
    cudaError_t e1 = cudaMalloc(&p, 600 << 10);
    cudaError_t e2 = cudaMalloc(&q, 600 << 10);
    cudaError_t last = cudaGetLastError();
    cudaFree(p);
    cudaError_t e3 = cudaMalloc(&q, 600 << 10);
    printf("%s memory cap 1 MiB: total %zu, first 600 KiB %s, second %s, after a free %s\n",
           tot == (1u << 20) && e1 == cudaSuccess && e2 == cudaErrorMemoryAllocation && last == e2 && e3 == cudaSuccess
               ? "PASS"
               : "FAIL",
           tot, cudaGetErrorString(e1), cudaGetErrorString(e2), cudaGetErrorString(e3));
    exit(tot == (1u << 20) && e2 == cudaErrorMemoryAllocation && e3 == cudaSuccess ? 0 : 1);
}

/* ------------------------------------------------------------------------
 * The planted bugs, each in a child. */

static void bug_barrier(void)
{
    double err;
    int bad = row_sums(1, &err);
    printf("row sums with a barrier removed: max rel err %.3g\n", err);
    exit(bad ? 3 : 0); /* 3: wrong results, as the op tests would see */
}

static void bug_index(void)
{
    float *a = dev0(1000), *b = dev0(1000), *o = dev(1000);
    CUDAEMU_LAUNCH(add_kernel, 4, 256, 0, 0, o, a, b, (size_t)1000, 1);
}

static void bug_shuffle(void)
{
    float *x = dev0(64), *o = dev(2);
    CUDAEMU_LAUNCH(warp_sum_kernel, 1, 64, 0, 0, o, x, 1);
}

static void bug_divergent_barrier(void)
{
    float *o = dev(NT);
    CUDAEMU_LAUNCH(early_return_kernel, 1, NT, 0, 0, o, 100);
}

static void bug_host_pointer(void)
{
    float *a = dev0(100), *o = dev(100);
    static float host[100];
    CUDAEMU_LAUNCH(add_kernel, 1, 128, 0, 0, o, a, host, (size_t)100, 0);
}

static void bug_freed_pointer(void)
{
    float *a = dev(100), *o = dev(100), *f = dev(100);
    cudaFree(f);
    CUDAEMU_LAUNCH(add_kernel, 1, 128, 0, 0, o, f, a, (size_t)100, 0);
}

static void bug_memcpy(void)
{
    float *a = dev(100), h[101];
    memset(h, 0, sizeof h);
    cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice);
}

/* Two tensors carved out of one allocation, as the backend carves
 * activations: "gelu.out" then "ln.inp". */
static float *carved(float **second)
{
    float *blk = dev0(2048), *x = dev(1024);
    cudaMemset(x, 0, 1000 * sizeof(float));
    CUDAEMU_ANNOTATE_SUBBUFFER(blk, 1000 * sizeof(float), "gelu.out");
    CUDAEMU_ANNOTATE_SUBBUFFER(blk + 1000, 1000 * sizeof(float), "ln.inp");
    *second = x;
    return blk;
}

/* A device table over two tensors of 1000 floats, carved()'s "gelu.out"
 * and "ln.out", the first entry `extra` floats longer (into "ln.inp");
 * declared for the next launch when `declare` is set. */
static table_entry *table_over(int64_t extra, int declare)
{
    float *x, *blk = carved(&x);
    CUDAEMU_ANNOTATE_SUBBUFFER(x, 1000 * sizeof(float), "ln.out");
    table_entry h[2] = {{blk, 1000 + extra}, {x, 1000}}, *t = NULL;
    if (cudaMalloc((void **)&t, sizeof h) != cudaSuccess) exit(2);
    cudaMemcpy(t, h, sizeof h, cudaMemcpyHostToDevice);
    if (declare) CUDAEMU_ANNOTATE_TABLE(t, 2, table_entry, x, n, sizeof(float));
    return t;
}

static void bug_table_entry(void)
{
    table_entry *t = table_over(1, 1);
    CUDAEMU_LAUNCH(table_scale_kernel, 2, NT, 0, 0, t, 2, 0);
}

/* The pattern of stale reads of neighbour_kernel without its barrier, in
 * `launches` launches: bit t of word l set when thread t read the value
 * from before its neighbour's store in launch l. */
static void stale_pattern(uint32_t *bits, int launches)
{
    float *o = dev(NT), h[NT];
    for (int l = 0; l < launches; l++) {
        CUDAEMU_LAUNCH(neighbour_kernel, 1, NT, 0, 0, o, 0);
        down(h, o, NT);
        for (int w = 0; w < NT / 32; w++) bits[l * (NT / 32) + w] = 0;
        for (int t = 0; t < NT; t++)
            if (h[t] == -1.0f) bits[l * (NT / 32) + t / 32] |= 1u << (t % 32);
    }
    cudaFree(o);
}

/* In a child (CUDAEMU_SEED set by the parent): the pattern of 4 launches on stdout. */
[[maybe_unused]] static void print_pattern(void)
{
    uint32_t b[4 * NT / 32];
    stale_pattern(b, 4);
    for (int i = 0; i < 4 * NT / 32; i++) printf("%08x", b[i]);
    printf("\n");
    fflush(stdout);
    exit(0);
}

#ifdef CUDAEMU_RACECHECK
/* The race detector's planted faults: each must stop the run (exit 70). */
static void race_one_block_reduction(void)
{
    float *x = dev0(300), *o = dev(1);
    CUDAEMU_LAUNCH(row_sum_kernel, 1, NT, 0, 0, o, x, 300, 1);
}

static void race_tile_loop(void)
{
    float *x = dev0(4 * NT), *o = dev(NT);
    CUDAEMU_LAUNCH(tile_loop_kernel, 1, NT, 0, 0, o, x, 4, 1);
}

static void race_warp_publish(void)
{
    float *o = dev(NT);
    CUDAEMU_LAUNCH(warp_publish_kernel, 1, NT, 0, 0, o, 0);
}

static void race_next_block(void)
{
    float *x = dev0(4 * NT), *y = dev0(4 * NT), *z = dev(4 * NT);
    CUDAEMU_LAUNCH(next_block_kernel, 4, NT, 0, 0, z, y, x);
}

static void race_shfl_store(void)
{
    float *o = dev(NT);
    CUDAEMU_LAUNCH(shfl_store_kernel, 1, NT, 0, 0, o, 1);
}

static void race_ln_colsum(void)
{
    float *x = dev0(16 * 64), *part = dev(64);
    CUDAEMU_LAUNCH(ln_colsum_kernel, 1, NT, NT / 32 * 64 * sizeof(float), 0, part, x, 16, 64, 1);
}

/* A table kernel launched without its declaration: the tensors it reaches
 * through the table are no argument's. */
static void table_undeclared(void)
{
    table_entry *t = table_over(0, 0);
    CUDAEMU_LAUNCH(table_scale_kernel, 2, NT, 0, 0, t, 2, 0);
}

/* A table kernel that runs one float past its entry's n. */
static void table_kernel_past(void)
{
    table_entry *t = table_over(0, 1);
    CUDAEMU_LAUNCH(table_scale_kernel, 2, NT, 0, 0, t, 2, 1);
}

static void bounds_write_past(void)
{
    float *x, *blk = carved(&x);
    CUDAEMU_LAUNCH(gelu_like_kernel, 4, 256, 0, 0, blk, x, 1000, 1, 0);
}

static void bounds_read_past(void)
{
    float *x, *blk = carved(&x);
    /* the input is the second tensor of the block: reading one past it
     * lands in the block's unannotated tail */
    CUDAEMU_LAUNCH(gelu_like_kernel, 4, 256, 0, 0, x, blk + 1000, 1000, 1, 1);
}

static void bounds_unwritten(void)
{
    float *a = dev0(100), *b = dev(100), *o = dev(100);
    CUDAEMU_LAUNCH(add_kernel, 1, 128, 0, 0, o, a, b, (size_t)100, 0);
}

/* The clean versions of the planted faults, each racecheck-clean. */
static void race_clean(void)
{
    float *x = dev0(300 * 4), *o = dev0(4 * NT), *y = dev(4 * NT);
    CUDAEMU_LAUNCH(row_sum_kernel, 4, NT, 0, 0, o, x, 300, 0);
    CUDAEMU_LAUNCH(tile_loop_kernel, 1, NT, 0, 0, o, x, 4, 0);
    CUDAEMU_LAUNCH(warp_publish_kernel, 1, NT, 0, 0, o, 1);
    CUDAEMU_LAUNCH(shfl_store_kernel, 1, NT, 0, 0, o, 0);
    CUDAEMU_LAUNCH(add_kernel, 4, NT, 0, 0, y, o, o, (size_t)(4 * NT), 0);
    float *xx, *blk = carved(&xx);
    CUDAEMU_LAUNCH(gelu_like_kernel, 4, 256, 0, 0, blk, xx, 1000, 0, 0);
    CUDAEMU_LAUNCH(ln_colsum_kernel, 1, NT, NT / 32 * 64 * sizeof(float), 0, y, x, 16, 64, 0);
    table_entry *t = table_over(0, 1);
    CUDAEMU_LAUNCH(table_scale_kernel, 2, NT, 0, 0, t, 2, 0);
    printf("clean kernels ran\n");
}
#endif

/* Runs fn in a child with CUDAEMU_SEED=seed; what it printed on stdout. */
[[maybe_unused]] static std::string child_stdout(void (*fn)(void), const char *seed)
{
    int pfd[2];
    std::string out;
    if (pipe(pfd)) return out;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 1);
        setenv("CUDAEMU_SEED", seed, 1);
        fn();
        exit(0);
    }
    close(pfd[1]);
    char buf[4096];
    ssize_t k;
    while ((k = read(pfd[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)k);
    close(pfd[0]);
    waitpid(pid, NULL, 0);
    return out;
}

static void planted(const char *what, void (*fn)(void), int want_status, const char *want1, const char *want2)
{
    std::string err;
    int st = emu_child(fn, &err);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    int ok = st == want_status && (!want1 || err.find(want1) != std::string::npos) &&
             (!want2 || err.find(want2) != std::string::npos);
    check(ok, "planted bug caught: %s (exit %d): %s", what, st, err.empty() ? "(wrong results)" : err.c_str());
}

#ifndef CUDAEMU_RACECHECK /* (the racecheck build stops on neighbour_kernel's race) */
/* Schedules: with a seed per launch, every pair of neighbouring threads is
 * seen in both orders (a missing barrier shows in the values whichever
 * side the reader is); the same CUDAEMU_SEED gives the same schedules, and
 * another seed others. */
static void schedules(void)
{
    std::string a = child_stdout(print_pattern, "7"), b = child_stdout(print_pattern, "7"),
                c = child_stdout(print_pattern, "8");
    check(!a.empty() && a == b && a != c, "schedules: CUDAEMU_SEED=7 replays the same stale reads (%zu hex digits), "
          "CUDAEMU_SEED=8 gives others", a.size());
}

static void pair_orders(void)
{
    enum { LAUNCHES = 32 };
    uint32_t bits[LAUNCHES * NT / 32];
    stale_pattern(bits, LAUNCHES);
    int both = 0;
    for (int t = 0; t < NT; t++) {
        int stale = 0;
        for (int l = 0; l < LAUNCHES; l++) stale += (bits[l * (NT / 32) + t / 32] >> (t % 32)) & 1;
        both += stale > 0 && stale < LAUNCHES;
    }
    check(both == NT, "schedules: over %d launches, each of the %d threads ran both before and after the neighbour "
          "it reads (%d did)", LAUNCHES, NT, both);
}
#endif

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the children fork before this process runs any OpenMP region */
    {
        std::string err;
        setenv("CUDAEMU_MEM_LIMIT", "1MiB", 1);
        int st = emu_child(mem_cap, &err);
        unsetenv("CUDAEMU_MEM_LIMIT");
        check(st == 0, "memory cap: cudaMalloc fails past CUDAEMU_MEM_LIMIT and succeeds after a free (exit %d) %s", st,
              err.c_str());
    }
#ifdef CUDAEMU_RACECHECK
    /* the racecheck build stops at the first racing or stray access */
    planted("a barrier removed from a block reduction", bug_barrier, 70, "racecheck:", "no __syncthreads() between");
    planted("an index off by one", bug_index, 70, "kernel add_kernel, block", "right past the end of argument");
#else
    planted("a barrier removed from a block reduction", bug_barrier, 3, NULL, NULL);
    planted("an index off by one", bug_index, 70, "kernel add_kernel wrote outside the device allocation",
            "argument 1 (o)");
#endif
    planted("a shuffle in divergent code", bug_shuffle, 70, "kernel warp_sum_kernel, block (0,0,0), thread",
            "never calls it");
    planted("a barrier in divergent code", bug_divergent_barrier, 70, "kernel early_return_kernel, block (0,0,0)",
            "not every thread of the block reaches");
    planted("a host pointer passed to a kernel", bug_host_pointer, 70, "kernel add_kernel: argument 3 (host)",
            "not device memory");
    planted("a freed pointer passed to a kernel", bug_freed_pointer, 70, "kernel add_kernel: argument 2 (f)", "freed");
    planted("a copy past the end of an allocation", bug_memcpy, 70, "cudaMemcpy: the destination", "past the end");
    planted("a table entry whose n reaches past its tensor", bug_table_entry, 70,
            "kernel table_scale_kernel: argument 1 (t), entry 0's table_entry.x (1001 elements of 4 bytes) reaches 4 "
            "bytes past the end of tensor \"gelu.out\" of 4000 bytes",
            NULL);
#ifndef CUDAEMU_RACECHECK
    schedules();
#else
    {
        std::string err;
        int st = emu_child(race_clean, &err);
        check(st == 0, "racecheck: the clean kernels (block reductions, a tile loop, warp publishing, a shuffle "
                       "after the store, in-bounds tensors, LayerNorm column sums, a declared table) run without a "
                       "report (exit %d) %s", st, err.c_str());
    }
    planted("racecheck: a barrier removed from a one-block reduction", race_one_block_reduction, 70,
            "kernel row_sum_kernel, block (0,0,0), thread", "::sh), which thread");
    planted("racecheck: a barrier removed from a loop over shared-memory tiles", race_tile_loop, 70,
            "kernel tile_loop_kernel, block (0,0,0), thread", "::tile), which thread");
    planted("racecheck: lane 0 of each warp writes what another warp reads without a barrier", race_warp_publish, 70,
            "kernel warp_publish_kernel, block (0,0,0), thread", "no __syncthreads() between them (");
    planted("racecheck: a block reads another block's output in the same launch", race_next_block, 70,
            "kernel next_block_kernel, block", "in the same launch: no two blocks of a launch are ordered");
    planted("racecheck: a shuffle whose source lane stores after the call", race_shfl_store, 70,
            "kernel shfl_store_kernel, block (0,0,0), thread", "and no warp-synchronous call with both lanes");
    planted("racecheck: one float written past a tensor carved out of a larger allocation", bounds_write_past, 70,
            "writes 4 bytes at", "right past the end of argument 1 (blk), tensor \"gelu.out\" of 4000 bytes; it lands "
            "in tensor \"ln.inp\"");
    planted("racecheck: one float read past a tensor", bounds_read_past, 70, "reads 4 bytes at",
            "past the end of argument 2 (blk + 1000), tensor \"ln.inp\"");
    planted("racecheck: a read of device memory nothing wrote", bounds_unwritten, 70,
            "kernel add_kernel, block (0,0,0), thread", "argument 3 (b)");
    planted("racecheck: a barrier removed from a LayerNorm backward's column sums over shared memory", race_ln_colsum,
            70, "kernel ln_colsum_kernel, block (0,0,0), thread", "of the block's dynamic shared memory), which thread");
    planted("racecheck: a table kernel launched without its CUDAEMU_ANNOTATE_TABLE", table_undeclared, 70,
            "kernel table_scale_kernel, block", "which no argument of the kernel points into");
    planted("racecheck: a table kernel one float past its entry's n", table_kernel_past, 70,
            "reads 4 bytes at", "right past the end of argument 1 (t), entry 0's table_entry.x (4000 bytes, in tensor "
            "\"gelu.out\"); it lands in tensor \"ln.inp\"");
    {
        /* the same seed replays the same report */
        std::string e1, e2;
        setenv("CUDAEMU_SEED", "12345", 1);
        emu_child(race_warp_publish, &e1);
        emu_child(race_warp_publish, &e2);
        unsetenv("CUDAEMU_SEED");
        check(e1 == e2 && e1.find("CUDAEMU_SEED=12345") != std::string::npos,
              "racecheck: a report names its seed, and the seed replays it word for word");
    }
#endif
    conversions();
    model();
    return check_summary();
}
