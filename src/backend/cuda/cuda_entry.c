/* The CUDA module's entry point (backend/cuda_module.h). Compiled into
 * libbertc_cuda.so only: the module refers to nothing in the bertc binary;
 * the core functions it calls are forwarded to the host table given here
 * (cuda_host.c). */
#include "backend/cuda/cuda_host.h"

/* The one exported symbol (the link's version script hides the rest). */
__attribute__((visibility("default"))) const bertc_cuda_api *bertc_cuda_backend_entry(int host_abi,
                                                                                      const bertc_cuda_host *h)
{
    if (host_abi == BERTC_CUDA_ABI && h) cuda_host_set(h);
    return cuda_backend_api();
}
