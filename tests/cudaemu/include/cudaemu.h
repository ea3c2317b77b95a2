/* cudaemu: a CPU stand-in for the part of CUDA that bertc's CUDA backend
 * uses, so that the CUDA backend's .cu files compile unchanged with the host C++
 * compiler and run on the CPU with CUDA's execution model (docs/cudaemu.md):
 *
 *   - the threads of a block are cooperative fibers on one OS thread:
 *     __syncthreads() and the warp shuffles switch between them, so a thread
 *     that reads shared memory before a barrier sees what the others wrote
 *     only after it; blocks run in parallel on OpenMP threads; warpSize 32;
 *   - a barrier not every thread of the block reaches, a shuffle whose mask
 *     does not match the lanes that call it, a bad launch configuration, a
 *     host or freed pointer passed to a kernel, a write past the end of a
 *     device allocation (guard zones checked after every launch) stop the
 *     run with the kernel, the block, the thread and the argument named;
 *   - device memory is filled with a NaN pattern when allocated, and
 *     cudaMalloc honours a memory cap (CUDAEMU_MEM_LIMIT).
 *
 * The emulated card is CUDAEMU_DEVICE (t4, the default; a100; h100): its
 * name, compute capability, SM count and memory. Its name always says that
 * it is emulated.
 *
 * This header is C-compatible in its first part (the checks the runtime,
 * cuBLASLt and cub stand-ins share); the execution model is C++. */
#ifndef CUDAEMU_H
#define CUDAEMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of guard zone on each side of a device allocation. */
#define CUDAEMU_GUARD 256
/* What new device memory is filled with (each byte): 0xFF is a NaN as a
 * float, -1 as an integer. */
#define CUDAEMU_FILL 0xFF

/* Stops the run: "cudaemu: WHAT" on stderr (with the kernel, block and
 * thread when a kernel is running), exit status 70. Never returns. */
void cudaemu_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Checks that [p, p + bytes) lies inside one live device allocation; stops
 * the run otherwise, naming `who` (a call) and `what` (its argument) and
 * saying whether p is a host pointer, freed device memory or past the end
 * of an allocation. bytes 0 checks p alone. */
void cudaemu_check_device(const void *p, size_t bytes, const char *who, const char *what);
/* 1 when p points into a live device allocation. */
int cudaemu_is_device(const void *p);
/* Checks every live allocation's guard zones; stops the run naming `after`
 * (the kernel or call that just ran) and the allocation when one was
 * overwritten. */
void cudaemu_check_guards(const char *after);

/* Declares [p, p + bytes) of a live device allocation a tensor named
 * `name` (CUDAEMU_ANNOTATE_SUBBUFFER; a later annotation replaces the ones
 * it overlaps; cudaFree forgets them). Outside a device allocation it
 * stops the run. */
void cudaemu_annotate_subbuffer(const void *p, size_t bytes, const char *name);
/* For the next kernel launch on this thread (CUDAEMU_ANNOTATE_TABLE): the
 * argument `tab` is a table in device memory of `count` entries of
 * `stride` bytes, and each entry's pointer at byte `ptr_off` reaches `elem`
 * bytes times the int64_t at byte `n_off` of the entry, a tensor the kernel
 * may touch beside its pointer arguments (`field` names it in reports).
 * The launch checks each entry's extent against the tensor its pointer
 * points into (an entry reaching past it stops the run) and the race check
 * holds the kernel to those extents. */
void cudaemu_annotate_table(const void *tab, int count, size_t stride, size_t ptr_off, size_t n_off, size_t elem,
                            const char *field);
/* The tensor holding p: the annotated sub-buffer, else the allocation (its
 * name "" then); 0 when p is not device memory. */
int cudaemu_tensor_of(const void *p, uintptr_t *lo, uintptr_t *hi, char *name, size_t cap);
/* Racecheck builds: [p, p + bytes) of device memory now holds data (a copy,
 * a memset, a cuBLASLt output), so kernels may read it. A no-op elsewhere. */
void cudaemu_mark_written(const void *p, size_t bytes);

/* The emulated card (CUDAEMU_DEVICE): compute capability. */
void cudaemu_card_cc(int *major, int *minor);

/* Bytes of device memory in use and the most ever in use (the emulated
 * allocator's peak, for comparing with bertc's planner). */
size_t cudaemu_mem_used(void);
size_t cudaemu_mem_peak(void);
void cudaemu_mem_reset_peak(void);

/* Rounding of fp32 to the inputs of the Tensor Cores (round to nearest
 * even): tf32 keeps 10 bits of mantissa. */
float cudaemu_round_tf32(float x);

#ifdef __cplusplus
}
#endif

#endif
