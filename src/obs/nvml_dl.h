/* NVML (the NVIDIA Management Library) loaded at run time with dlopen.
 *
 * bertc never links libnvidia-ml: the binary has to start where no driver is
 * installed (CPU machines, CI), and nvml.h is not needed to build. The few
 * NVML types and functions used are declared in nvml_dl.c from NVIDIA's
 * documented signatures.
 *
 * The library is "libnvidia-ml.so.1" unless the environment variable
 * BERTC_NVML_LIB names another file (the tests point it at a stub library,
 * tests/fakenvml, so that the GPU code paths run in CI).
 *
 * Every query may fail on its own (a driver that does not support power
 * readings, a lost GPU): a failed reading is NaN in the sample and the
 * error is kept, so one missing value never hides the others. */
#ifndef BERTC_OBS_NVML_DL_H
#define BERTC_OBS_NVML_DL_H

#include <stdint.h>

typedef struct nvml_lib nvml_lib;

/* Loads and initialises NVML. ERR_RUNTIME with a message saying why when
 * there is no library, a symbol is missing or the driver is not loaded. */
int nvml_open(nvml_lib **out);
void nvml_close(nvml_lib *nv);
/* The path that was (or would be) loaded. */
const char *nvml_lib_path(void);

int nvml_device_count(nvml_lib *nv, int *count);

/* What does not change while a process runs. Strings are "" and numbers -1
 * when NVML could not say; err holds the first failed query's message. */
typedef struct {
    char name[96];
    char uuid[96];
    int cc_major, cc_minor;          /* compute capability */
    double mem_total;                /* bytes */
    double power_limit_w;            /* enforced limit */
    char err[160];
} nvml_device_info;

/* Throttle reason bits, as NVML numbers them. */
enum {
    NVML_THR_GPU_IDLE = 0x1,
    NVML_THR_APP_CLOCKS = 0x2,
    NVML_THR_SW_POWER_CAP = 0x4,
    NVML_THR_HW_SLOWDOWN = 0x8,
    NVML_THR_SYNC_BOOST = 0x10,
    NVML_THR_SW_THERMAL = 0x20,
    NVML_THR_HW_THERMAL = 0x40,
    NVML_THR_HW_POWER_BRAKE = 0x80,
    NVML_THR_DISPLAY_CLOCKS = 0x100,
};

/* One reading. NaN means the query failed (nerr counts those). */
typedef struct {
    double util_pct, mem_util_pct;   /* busy time of the SMs and of the memory bus, last sample period */
    double mem_used, mem_total;      /* bytes */
    double temp_c;
    double sm_clock_mhz, mem_clock_mhz;
    double power_w, power_limit_w;
    uint64_t throttle;               /* valid when throttle_ok */
    int throttle_ok;
    int nerr;
    char err[160];                   /* first error of this sample, "" if none */
} nvml_sample;

int nvml_device_info_get(nvml_lib *nv, int index, nvml_device_info *info);
/* Fills s; returns 0 even when some queries fail (see s->nerr), ERR_RUNTIME
 * only when the device cannot be reached at all. */
int nvml_device_sample(nvml_lib *nv, int index, nvml_sample *s);

/* Driver version ("550.54.15") and the CUDA version the driver supports
 * (12040 for 12.4); "" and 0 when unknown. */
void nvml_driver_versions(nvml_lib *nv, char *driver, int cap, int *cuda_version);

/* Throttle reasons as names joined by '+' ("sw_power_cap+hw_slowdown"),
 * "none" for 0. Returns buf. */
char *nvml_throttle_names(uint64_t mask, char *buf, int cap);

#endif
