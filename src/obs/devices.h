/* What bertc can run on: the GPUs NVML sees, the CPU, and what bertc will
 * pick. Used by `bertc devices`, and by the trainer for the hardware line
 * of its start-up and of the report. */
#ifndef BERTC_OBS_DEVICES_H
#define BERTC_OBS_DEVICES_H

#include <stddef.h>
#include <stdio.h>

/* The whole `bertc devices` text. Never fails: a missing driver or a
 * failing query is described, not returned. */
void devices_print(FILE *f);

/* One line: "GPU 0: Tesla T4 (15.0 GiB, compute 7.5) | CPU: AMD EPYC, 2
 * threads, AVX2 FMA, 7.8 GiB". Returns buf. */
char *devices_hardware_line(char *buf, size_t cap);

/* --precision auto's choice for a GPU of compute capability major.minor:
 * "bf16" from 8.0, "fp16" on 7.x, "fp32" below. */
const char *devices_auto_precision(int cc_major, int cc_minor);

#endif
