/* Which CPU kernels bertc runs, decided from what the CPU can do.
 *
 * The level and the variant of each of bertc's own kernel families are
 * cpu/cpu_isa.h's decision; here are the libraries that follow it. A library
 * that picks its kernels from a table of CPU models and does not know a new
 * one (OpenBLAS 0.3.21 and Emerald Rapids, say) falls back to generic SSE
 * kernels, 3-6x slower. OpenBLAS picks its kernels in a
 * constructor that runs when the library is loaded, before main(), and reads
 * OPENBLAS_CORETYPE then; so cpu_kernels_init() sets that variable and
 * executes the program again (once) when OpenBLAS's own pick is below the
 * level bertc wants.
 *
 * What the user can set:
 *   BERTC_CPU_ISA=auto|avx512|avx2|avx|sse   the highest level bertc's kernels use
 *                                            (a cap; default auto = the CPU's best)
 *   OPENBLAS_CORETYPE=NAME                   OpenBLAS's kernels, honoured as given
 *   BERTC_GEMM=auto|onednn|openblas          the training GEMM: oneDNN's sgemm at level
 *                                            avx2 and above where libdnnl loads (auto, the
 *                                            default), else OpenBLAS
 * Either one asking for more than the CPU has is an error (exit 2), never an
 * illegal instruction; so is BERTC_GEMM=onednn where oneDNN does not load. */
#ifndef BERTC_BACKEND_CPU_KERNELS_H
#define BERTC_BACKEND_CPU_KERNELS_H

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/onednn_dl.h"

#include <stddef.h>

/* The level an OpenBLAS core's kernels use ("SkylakeX" -> AVX512), -1 for a name it does not know. */
int cpu_blas_core_level(const char *core);
/* The OpenBLAS core bertc asks for at a level on this CPU ("Cooperlake", "SkylakeX", "Haswell", ...). */
const char *cpu_blas_core_for(const cpu_isa_info *cpu, cpu_isa_level level);

/* The decision, for reports and for the kernels that dispatch on it. */
typedef struct {
    int ready;                  /* cpu_kernels_init ran */
    cpu_isa_info cpu;
    cpu_isa_level level;        /* what bertc's kernels use */
    char level_from[64];        /* "auto" or "BERTC_CPU_ISA=avx2" */
    char blas_core[32];         /* OpenBLAS's core in use */
    char blas_from[96];         /* "OpenBLAS's own choice", "set by bertc", "OPENBLAS_CORETYPE=... (set by the user)" */
    char blas_fallback[32];     /* OpenBLAS's own pick when bertc overrode a generic fallback, else "" */
    char warning[256];          /* something the start-up report should say, else "" */
    /* The training GEMM (inference's is gemm_fixed): decided when first needed. */
    int gemm_ready;
    int gemm_onednn;            /* 1: oneDNN's sgemm; 0: OpenBLAS's */
    char gemm_from[40];         /* "auto" or "BERTC_GEMM=openblas" */
    char onednn_version[32];    /* "2.6.3" when loaded */
    char onednn_isa[48];        /* its JIT's instructions: "avx512_core_bf16" */
    char onednn_missing[200];   /* under auto: why oneDNN is not used, else "" */
} cpu_kernels_state;

/* Decides the kernels. Call first thing in main() (and before any BLAS call);
 * may replace the process image with the same program and arguments (once).
 * Returns 0, or an err.h code with a message (a level or core the CPU lacks,
 * an unknown name). Idempotent. */
int cpu_kernels_init(int argc, char **argv);
const cpu_kernels_state *cpu_kernels(void);

/* One line: "avx2 (auto; AVX2 FMA, no AVX-512), OpenBLAS 0.3.21 core Zen (OpenBLAS's own choice)". */
char *cpu_kernels_describe(char *buf, size_t cap);
/* One line per kernel family, each "kernel FAMILY: VARIANT (why)\n": gemm
 * (the training GEMM's library and its kernels), then cpu_isa.h's families.
 * Loads oneDNN the first time. */
char *cpu_kernels_lines(char *buf, size_t cap);
/* The training GEMM library, for reports: "oneDNN 2.6.3 (avx512_core_bf16)" or
 * "OpenBLAS 0.3.21 (core Zen)". Loads oneDNN the first time. */
char *cpu_kernels_gemm(char *buf, size_t cap);
/* Decides the training GEMM (BERTC_GEMM, and whether oneDNN loads), once;
 * 0, or an err.h code for a BERTC_GEMM that cannot be had. */
int cpu_kernels_gemm_choose(void);
/* Whether --precision bf16 can run here: AVX512-BF16 (or AMX-BF16), the
 * avx512 level, and oneDNN's bf16 matmul (loaded on the first call). 0 and,
 * in impl, "oneDNN 2.6.3 gemm:jit"; or ERR_INPUT with the reason. */
int cpu_kernels_bf16(char *impl, size_t cap);
/* oneDNN's dnnl_sgemm when it is the training GEMM, else NULL (use cblas_sgemm). */
onednn_sgemm_fn cpu_kernels_onednn_sgemm(void);

#endif
