/* What the CPU can do, the level bertc's kernels are held to, and which code
 * each kernel family runs: the one place that decides.
 *
 * The level comes from CPUID feature bits and the register state the OS
 * saves (XCR0), never from a table of model numbers, capped by
 * BERTC_CPU_ISA=auto|avx512|avx2|avx|sse. Every kernel family with code for
 * more than one level asks cpu_kernel_level() which to run; nothing else
 * looks at the CPU (no target_clones, no __builtin_cpu_supports), so a cap
 * runs exactly the code a CPU of that level runs. Each family's variants
 * compute the same rounded operations where their levels share code, and
 * differ only in the order of sums where vector widths differ.
 *
 * A new kernel family: an entry in cpu_kernel_family (and its name and the
 * levels it has code for in cpu_isa.c); its code asks cpu_kernel_level(). */
#ifndef BERTC_BACKEND_CPU_CPU_ISA_H
#define BERTC_BACKEND_CPU_CPU_ISA_H

#include <stddef.h>

typedef enum { CPU_ISA_SSE = 0, CPU_ISA_AVX = 1, CPU_ISA_AVX2 = 2, CPU_ISA_AVX512 = 3 } cpu_isa_level;

typedef struct {
    char vendor[13];
    int family, model;
    /* CPUID feature bits */
    int sse3, ssse3, sse41, sse42, avx, fma, f16c, avx2, bmi1, bmi2, lzcnt, movbe;
    int avx512f, avx512dq, avx512cd, avx512bw, avx512vl, avx512_vnni, avx512_bf16, avx512_fp16;
    int amx_tile, amx_bf16;
    /* register state the OS saves (XCR0): xmm+ymm, opmask+zmm, amx tiles */
    int os_ymm, os_zmm, os_amx;
    cpu_isa_level level; /* the highest level both the CPU and the OS support */
} cpu_isa_info;

/* Reads CPUID and XGETBV (on x86-64; elsewhere everything is 0 and level SSE). */
void cpu_isa_detect(cpu_isa_info *out);

/* "sse", "avx", "avx2", "avx512" */
const char *cpu_isa_name(cpu_isa_level level);
/* 0 and *out on a known name; -1 otherwise. "auto" is not a level: the caller handles it. */
int cpu_isa_parse(const char *s, cpu_isa_level *out);
/* What a level needs, in words: "AVX-512 (F, DQ, CD, BW, VL) with the OS saving the ZMM state". */
const char *cpu_isa_needs(cpu_isa_level level);

/* The decision: this CPU, and the level after BERTC_CPU_ISA. Made once, on
 * first use; a bad or too high BERTC_CPU_ISA is ignored here (the level
 * stays the CPU's) and refused by cpu_isa_check_cap. */
typedef struct {
    cpu_isa_info cpu;
    cpu_isa_level level; /* what bertc's kernels use */
    char level_from[64]; /* "auto" or "BERTC_CPU_ISA=avx2" */
} cpu_isa_state;
const cpu_isa_state *cpu_isa(void);
/* 0, or ERR_INPUT with a message for a BERTC_CPU_ISA that names no level or
 * one above the CPU's. */
int cpu_isa_check_cap(void);
/* The ERR_INPUT message for a level this CPU lacks, asked for by `what`. */
int cpu_isa_refuse(const char *what, cpu_isa_level asked);

/* bertc's own kernel families (the GEMM library is cpu_kernels.h's). */
typedef enum {
    CPU_K_GEMM_FIXED,  /* gemm_fixed.c: the batch-invariant SGEMM (scalar, avx2, avx512) */
    CPU_K_GELU,        /* ops_dense.c: GELU forward and backward */
    CPU_K_SOFTMAX,     /* ops_attention.c: the attention softmax and its backward */
    CPU_K_LAYERNORM,   /* ops_dense.c: layernorm rows and their gradients */
    CPU_K_DROPOUT,     /* dropout_mask.c: Philox masks, their application, the probabilities' store; ops_dense.c's
                        * multiplies by a mask */
    CPU_K_ADAM,        /* ops_loss.c: AdamW, the gradient norm, scaling and the finite check */
    CPU_K_ELEMENTWISE, /* ops_dense.c: the add of whole tensors and the bias gradients' column sums */
    CPU_K_GEMM_INT8,   /* gemm_int8.c: the int8 linear layer of inference (scalar, avx512vnni: AVX512-VNNI) */
    CPU_K_GEMM_BF16,   /* gemm_bf16.c: the batch-invariant bf16 linear layer, and bf16.c's fp32 -> bf16 rounding
                        * (scalar, avx512bf16: AVX512-BF16) */
    CPU_K_COUNT
} cpu_kernel_family;

/* The level whose code the family runs: the highest level it has code for
 * that is at most the decided level and whose instructions the CPU has
 * (the sse code is x86-64's baseline, also below SSE3). */
cpu_isa_level cpu_kernel_level(cpu_kernel_family f);
/* 1 when the family runs the fastest code it has on this CPU (gemm_int8:
 * its AVX512-VNNI kernel, gemm_bf16: its AVX512-BF16 kernel, gelu: avx2).
 * Otherwise 0, with why (when not NULL) saying what stands in the way, for
 * a refusal such as "--precision int8: this CPU (GenuineIntel family 6
 * model 85) lacks AVX512-VNNI": "this CPU (...) lacks X" for an instruction
 * set the CPU lacks, "BERTC_CPU_ISA=avx2 holds bertc below avx512" for a
 * cap. */
int cpu_kernel_fast(cpu_kernel_family f, char *why, size_t cap);
/* "gelu", "softmax", ... */
const char *cpu_kernel_family_name(cpu_kernel_family f);
/* The variant in words ("avx2", "scalar" for gemm_fixed's sse level,
 * "avx512vnni" for gemm_int8's avx512 one) and why: "avx2 (level avx512: the
 * CPU's, no cap; gelu has no avx512 code)", "scalar (level avx512: the CPU's,
 * no cap; the CPU lacks AVX512-VNNI)". */
char *cpu_kernel_describe(cpu_kernel_family f, char *buf, size_t cap);

#endif
