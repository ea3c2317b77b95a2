/* The CUDA backend as a module: libbertc_cuda.so, built next to the bertc
 * binary when nvcc is found, loaded with dlopen only when backend selection
 * needs a GPU (--device cuda, or --device auto where NVIDIA's driver is
 * present), as ggml loads its backends. The bertc binary links no CUDA
 * library: it starts, and runs on the CPU, on any machine.
 *
 * The contract (this header is all the module and bertc share):
 * - The module exports one symbol, bertc_cuda_backend_entry (a
 *   bertc_cuda_entry_fn). bertc calls it with its BERTC_CUDA_ABI and a table
 *   of host functions (errors go into bertc's own error state through it);
 *   it returns the module's table of functions.
 * - bertc uses the module only when the table's abi equals its own
 *   BERTC_CUDA_ABI and the sizes of the shared structs agree; otherwise it
 *   reports an ABI mismatch and runs on the CPU. The first two fields (abi,
 *   size) never move. Bump BERTC_CUDA_ABI whenever backend_i, backend_mem,
 *   precision_kind or the two tables below change.
 * - The module links cudart statically and cuBLASLt dynamically (its own
 *   dependency, loaded only with it), and refers to nothing in bertc: the
 *   core (src/core) is reached only through bertc_cuda_host.
 * - Where: the file BERTC_CUDA_MODULE names, else libbertc_cuda.so in the
 *   directory of the running executable (/proc/self/exe).
 *
 * Programs that link the CUDA objects in (tests/gpu's gpu_check) register
 * the table themselves: cuda_module_use(cuda_backend_api()). */
#ifndef BERTC_CUDA_MODULE_H
#define BERTC_CUDA_MODULE_H

#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BERTC_CUDA_ABI 8 /* raised whenever bertc_cuda_host or bertc_cuda_api changes */
#define BERTC_CUDA_ENTRY "bertc_cuda_backend_entry"
#define BERTC_CUDA_MODULE_FILE "libbertc_cuda.so"

/* What bertc lends the module (its error state; one rule it owns). */
typedef struct {
    int (*err_set_str)(int code, const char *msg);     /* err_set(code, "%s", msg) */
    int (*err_wrap_str)(int code, const char *prefix); /* err_wrap(code, "%s", prefix) */
    const char *(*err_msg)(void);
    precision_kind (*auto_precision)(int cc_major, int cc_minor); /* select_auto_precision */
} bertc_cuda_host;

/* What the module gives (see backend/cuda/cuda_backend.h for each call). */
typedef struct {
    int abi;                 /* BERTC_CUDA_ABI the module was built with */
    size_t size;             /* sizeof(bertc_cuda_api) in the module */
    size_t backend_i_size;   /* sizeof(backend_i) in the module */
    size_t backend_mem_size; /* sizeof(backend_mem) in the module */
    const char *version;     /* bertc version of the module's build */
    int cuda_runtime;        /* CUDART_VERSION it was built with (12040 = 12.4) */
    int (*probe)(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total, char *why,
                 size_t why_cap);
    int (*create)(backend *out, int device, precision_kind precision, int64_t mem_limit);
    precision_kind (*precision)(void *ctx);
    int (*mem)(void *ctx, backend_mem *out);
    void (*trim)(void *ctx);
    void (*reset_peak)(void *ctx);
    /* Data-parallel training on GPUs (backend/cuda/cuda_nccl.h; NULL in a
     * module without them): NCCL opened at run time, the gradient all-reduce
     * on the device. */
    int (*nccl_load)(void);
    int (*nccl_init)(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root));
    void (*nccl_free)(void);
    /* One gradient bucket's all-reduce queued behind the work on the
     * backend's stream (backend_ctx: a backend made by create), and the wait
     * for all that were queued (cuda_nccl.h). */
    int (*nccl_allreduce_begin)(void *backend_ctx, float *dev_x, size_t n);
    int (*nccl_allreduce_wait)(void);
    /* --shard-optimizer: a bucket's in-place reduce-scatter into
     * each rank's piece (dist_piece's: equal pieces, the last rank's with
     * the tail) and the all-gather of the pieces, queued like
     * nccl_allreduce_begin; nccl_allreduce_wait waits for them too. */
    int (*nccl_reduce_scatter_begin)(void *backend_ctx, float *dev_x, size_t n);
    int (*nccl_allgather_begin)(void *backend_ctx, float *dev_x, size_t n);
    /* Pipeline stages' messages on the device (cuda_nccl.h's
     * cuda_nccl_p2p_*: channels, slots), queued behind the backend's
     * stream (backend_ctx). */
    int (*nccl_p2p_init)(int rank, int nranks, int device, int (*bcast)(void *buf, size_t bytes, int root));
    int (*nccl_p2p_send)(void *backend_ctx, int ch, const float *dev, size_t n, int peer, int slot);
    int (*nccl_p2p_recv)(void *backend_ctx, int ch, float *dev, size_t n, int peer, int slot);
    int (*nccl_p2p_wait)(int slot);
    void (*nccl_p2p_free)(void);
} bertc_cuda_api;

/* Returns the module's table (never NULL); uses host only when host_abi is
 * the module's own BERTC_CUDA_ABI. */
typedef const bertc_cuda_api *(*bertc_cuda_entry_fn)(int host_abi, const bertc_cuda_host *host);

/* ---- bertc's side (backend/cuda_module.c) ---- */

/* The path the module is looked for at (BERTC_CUDA_MODULE, else next to
 * the executable). */
const char *cuda_module_path(void);
/* 1 when this build made the module (nvcc was found). */
int cuda_module_built(void);
/* 1 when NVIDIA's driver is present: /proc/driver/nvidia, /dev/nvidiactl,
 * or WSL's /dev/dxg. --device auto loads the module only then. */
int cuda_driver_present(void);
/* Loads the module once (later calls return the same answer): its table,
 * or NULL with the reason in cuda_module_why() (not built, not found at
 * PATH, the dlopen error, no entry point, an ABI mismatch). Sets no error. */
const bertc_cuda_api *cuda_module_load(void);
/* The loaded table, or NULL when nothing was loaded (no load attempted). */
const bertc_cuda_api *cuda_module_loaded(void);
/* Why the module is not loaded: "" when it is, or before any attempt. */
const char *cuda_module_why(void);
/* The module for a backend choice: force = 1 (--device cuda, `bertc
 * devices`) loads it; force = 0 (--device auto, a probe) first checks, without
 * loading anything, that the file exists and that a driver is present. The
 * table, or NULL with the reason in why. */
const bertc_cuda_api *cuda_module_get(int force, char *why, size_t cap);
/* For programs that link the CUDA backend in: use this table, load nothing. */
void cuda_module_use(const bertc_cuda_api *api);
/* One line on the module (`bertc version`, `bertc devices`), loading it as
 * cuda_module_get(load) would: "PATH: loaded (ABI 8, bertc 0.1.0, CUDA
 * runtime 12.4)", "PATH: found; not loaded (no NVIDIA driver; ...)",
 * "not available: REASON". */
char *cuda_module_describe(char *buf, size_t cap, int load);

/* ---- the module's side (backend/cuda/cuda_backend.cu, cuda_entry.c) ---- */
/* The exported entry point (a bertc_cuda_entry_fn). */
const bertc_cuda_api *bertc_cuda_backend_entry(int host_abi, const bertc_cuda_host *host);
/* The table of a linked-in CUDA backend (also what the entry returns). */
const bertc_cuda_api *cuda_backend_api(void);

#ifdef __cplusplus
}
#endif

#endif
