/* The CUDA module's link to bertc's core (cuda_host.c): the host table
 * the entry point (cuda_entry.c) is given, through which the module's
 * err_set, err_wrap, err_msg and select_auto_precision reach bertc. */
#ifndef BERTC_CUDA_HOST_H
#define BERTC_CUDA_HOST_H

#include "backend/cuda_module.h"

/* Sets the table the forwarders use (NULL: none; they then answer alone). */
void cuda_host_set(const bertc_cuda_host *h);

#endif
