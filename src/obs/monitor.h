/* The monitor: a thread that samples the GPU (through NVML, when there is
 * one) and the process (/proc) every interval, appends a row to
 * RUN/monitor.csv, writes the series to TensorBoard and keeps the latest
 * values for the progress line.
 *
 * monitor.csv columns (empty cell = the query failed or there is no GPU):
 *
 *   unix_time,elapsed_s,step,gpu_util_pct,gpu_mem_util_pct,gpu_mem_used_mib,
 *   gpu_mem_total_mib,gpu_temp_c,sm_clock_mhz,mem_clock_mhz,power_w,
 *   power_limit_w,throttle,cpu_pct,rss_mib,mem_avail_mib
 *
 * step is the training step last given to monitor_set_step; throttle is
 * nvml_throttle_names' text. A resumed run appends to the same file (time
 * runs on in unix_time). TensorBoard tags: gpu/util_pct, gpu/mem_used_gib,
 * gpu/temp_c, gpu/power_w, gpu/sm_clock_mhz, cpu/process_pct, cpu/rss_gib,
 * cpu/mem_available_gib, at the training step of the sample (so a resumed
 * run's SessionLog drops them with the training points; TensorBoard's
 * "relative" or "wall" x axis shows them against time).
 *
 * A GPU that is missing or answers errors never stops the monitor: failed
 * readings are empty cells and each distinct error is logged once. */
#ifndef BERTC_OBS_MONITOR_H
#define BERTC_OBS_MONITOR_H

#include "obs/nvml_dl.h"
#include "obs/sysinfo.h"
#include "obs/tb.h"

#include <stddef.h>
#include <stdint.h>

typedef struct monitor monitor;

typedef struct {
    double interval_s;    /* sampling period; 0 = no thread (samples only through monitor_sample_now) */
    int gpu_index;        /* NVML index of the GPU to watch; -1 = do not load NVML */
    const char *csv_path; /* NULL = no CSV */
    tb_writer *tb;        /* NULL = no TensorBoard; not owned */
    int64_t step;         /* the training step until monitor_set_step (a resumed run's checkpoint step) */
} monitor_options;

int monitor_start(monitor **out, const monitor_options *o);
/* Stops the thread (within about 10 ms), closes the CSV, unloads NVML. */
void monitor_stop(monitor *m);

/* Takes one sample now, on the caller's thread (tests; the cost figure). */
int monitor_sample_now(monitor *m);
void monitor_set_step(monitor *m, int64_t step);
/* "GPU 97% 14.1/15.0 GiB 71°C | CPU 180% RSS 1.2 GiB"; "" before the first
 * sample. Safe to call from any thread. */
void monitor_latest(monitor *m, char *line, size_t cap);

/* 1 when NVML loaded and has a GPU of that index. */
int monitor_has_gpu(const monitor *m);
/* Why there is no GPU reading ("" when there is one). */
const char *monitor_gpu_status(const monitor *m);
int64_t monitor_samples(const monitor *m);

/* The last sample's values, for tests and the report. */
void monitor_last_sample(monitor *m, nvml_sample *g, proc_sample *p);

#endif
