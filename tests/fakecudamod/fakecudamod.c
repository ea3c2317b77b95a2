/* A fake CUDA module (see CMakeLists.txt for the variants): just enough of
 * src/backend/cuda_module.h's contract for the loader's checks. */
#include "backend/cuda_module.h"

#include <stdio.h>
#include <string.h>

#ifdef FAKE_NOENTRY
__attribute__((visibility("default"))) int fake_cuda_not_an_entry(void) { return 42; }
#else

static const bertc_cuda_host *host;

static int probe(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total, char *why,
                 size_t why_cap)
{
    if (name && name_cap) name[0] = 0;
    if (cc_major) *cc_major = 0;
    if (cc_minor) *cc_minor = 0;
    if (total) *total = 0;
    if (why && why_cap) snprintf(why, why_cap, "the fake CUDA module has no GPU %d", gpu);
    return 0;
}

static int create(backend *out, int device, precision_kind precision, int64_t mem_limit)
{
    (void)precision;
    (void)mem_limit;
    out->i = NULL;
    out->ctx = NULL;
    char msg[96];
    snprintf(msg, sizeof msg, "the fake CUDA module cannot create GPU %d", device);
    return host ? host->err_set_str(1, msg) : 1;
}

static precision_kind precision(void *ctx) { (void)ctx; return PREC_FP32; }
static int mem(void *ctx, backend_mem *out) { (void)ctx; memset(out, 0, sizeof *out); return 0; }
static void nop(void *ctx) { (void)ctx; }

static const bertc_cuda_api api = {
#ifdef FAKE_BADABI
    999,
#else
    BERTC_CUDA_ABI,
#endif
    sizeof(bertc_cuda_api),
#ifdef FAKE_BADSIZE
    sizeof(backend_i) + 8,
#else
    sizeof(backend_i),
#endif
    sizeof(backend_mem),
    "fake",
    12040,
    probe, create, precision, mem, nop, nop,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* no NCCL */
};

__attribute__((visibility("default"))) const bertc_cuda_api *bertc_cuda_backend_entry(int host_abi,
                                                                                      const bertc_cuda_host *h)
{
    if (host_abi == BERTC_CUDA_ABI) host = h;
    return &api;
}
#endif
