/* Working memory of bertc's own GEMMs (gemm_fixed, gemm_int8, gemm_bf16):
 * one buffer per calling thread, kept between calls (a fresh multi-megabyte
 * allocation would page-fault in every call) and freed when the thread
 * exits. The GEMMs share it: a thread runs one product at a time, and no
 * product keeps the pointer past its return. */
#ifndef BERTC_BACKEND_CPU_GEMM_WS_H
#define BERTC_BACKEND_CPU_GEMM_WS_H

#include <stddef.h>

/* At least bytes (rounded up to 64) of 64-byte aligned memory, or NULL when
 * it cannot be allocated. The contents are not kept: a larger request frees
 * the old buffer. */
void *gemm_ws_get(size_t bytes);

#endif
