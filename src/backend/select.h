/* Choosing the backend: --device cpu|cuda|auto and --precision
 * auto|fp32|tf32|fp16|bf16, with a clean fall-back to the CPU where there is
 * no GPU, no driver, or a build without CUDA.
 *
 * Usage (the trainer, predict, bench):
 *
 *   backend_opts bo = backend_opts_default();        // auto, auto, all threads
 *   bo.device = device;                               // --device, parsed by the command (cli/options.h)
 *   bo.precision = precision;                         // --precision
 *   bo.threads = o->threads;
 *   bo.mem_limit = o->gpu_mem_limit;                  // --gpu-mem-limit, 0 = none
 *   backend be; backend_info info;
 *   if ((rc = backend_select(&be, &bo, &info))) return rc;
 *   // info.precision is resolved (never PREC_AUTO); info.is_cuda; info.desc is
 *   // one line for the start-up report ("cuda: NVIDIA H200 (cc 9.0, 139.8 GiB), bf16")
 *   ...
 *   backend_free(&be);
 *
 * The CUDA backend is a module (backend/cuda_module.h), loaded here only
 * when a choice needs it. --device auto: CUDA when a usable GPU is found
 * (the module next to the binary, a driver, compute capability 7.5 or
 * newer; without a driver the module is not even loaded), otherwise the
 * CPU backend and one line on stderr ("bertc: warning: no usable CUDA
 * device (...): using the CPU backend, fp32"). --device cuda: an error
 * (ERR_RUNTIME) instead of the fall-back, "--device cuda: no CUDA backend:
 * REASON" when the module cannot be loaded (REASON names the path tried).
 * --device cpu: the CPU backend.
 *
 * --precision auto is bf16 on compute capability 8.0 and newer, fp16 on 7.x,
 * fp32 on the CPU. On the CPU (which computes in fp32 only) an explicit
 * tf32/fp16/bf16 is ERR_INPUT with --device cpu, and becomes fp32 with the
 * notice above when --device auto fell back. bf16 on a 7.x GPU is ERR_INPUT.
 *
 * fp16 needs dynamic loss scaling (train/lossscale.h): precision_needs_loss_scaling.
 * Memory figures for --micro-batch auto: backend_mem_query. */
#ifndef BERTC_BACKEND_SELECT_H
#define BERTC_BACKEND_SELECT_H

#include "backend/backend.h" /* precision_kind, backend_mem */

#include <stdint.h>

typedef enum {
    DEVICE_AUTO = 0,
    DEVICE_CPU,
    DEVICE_CUDA,
} device_kind;

/* "cpu", "cuda", "auto" / "auto", "fp32", "tf32", "fp16", "bf16"; ERR_INPUT
 * naming the option and the choices otherwise. */
int select_parse_device(const char *s, device_kind *out);
int select_parse_precision(const char *s, precision_kind *out);
const char *select_device_name(device_kind d);
const char *select_precision_name(precision_kind p);
/* 1 for fp16 (gradients can overflow its range). */
int precision_needs_loss_scaling(precision_kind p);

typedef struct {
    device_kind device;
    precision_kind precision;
    int threads;       /* CPU backend threads, 0 = all cores */
    int gpu;           /* CUDA device ordinal */
    int64_t mem_limit; /* bytes the CUDA backend may allocate; 0 = no limit (--gpu-mem-limit) */
    int quiet;         /* 1: no fall-back notice on stderr (tests) */
    int batch_invariant; /* 1: answers independent of their batch (backend_set_batch_invariant; CPU only) */
} backend_opts;

backend_opts backend_opts_default(void);

typedef struct {
    int is_cuda;
    precision_kind precision; /* resolved: never PREC_AUTO */
    char gpu_name[128];       /* "" on the CPU */
    int cc_major, cc_minor;   /* 0 on the CPU */
    int64_t gpu_total;        /* bytes of device memory; 0 on the CPU */
    char fallback[256];       /* why auto fell back to the CPU; "" otherwise */
    char desc[256];           /* one line for reports */
} backend_info;

/* Creates the backend the options ask for (see the top of this file). */
int backend_select(backend *out, const backend_opts *o, backend_info *info);

/* What a GPU probe found without creating a backend: `bertc plan` uses it
 * (the module is loaded as for --device auto). Returns 1 when a usable CUDA device exists (and
 * fills name, compute capability and total memory), 0 otherwise with the
 * reason in why (never an error: no driver is an answer, not a failure). */
int select_probe_cuda(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total,
                      char *why, size_t why_cap);

int backend_mem_query(backend *b, backend_mem *out);
void backend_mem_reset_peak(backend *b);
/* Frees the backend's working memory (the CUDA workspace, grown again on
 * demand by the next op that needs it): call it after freeing a model
 * before building a smaller one, so that the workspace of the larger
 * micro-batch does not stay behind. No-op on the CPU backend. */
void backend_mem_trim(backend *b);

#endif
