/* NVML through dlopen. The declarations below follow NVIDIA's NVML API
 * reference (nvml.h is not needed to build): only the calls bertc uses. */
#define _GNU_SOURCE
#include "obs/nvml_dl.h"
#include "core/alloc.h"
#include "core/dynlib.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;           /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory; /* percent */
} nvmlUtilization_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_NOT_SUPPORTED = 3 };
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

struct nvml_lib {
    dynlib dl;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*get_count)(unsigned int *);
    nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t *);
    /* optional: a NULL one reads as "not supported" */
    nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*get_uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*get_util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*get_temp)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*get_clock)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned int *);       /* milliwatts */
    nvmlReturn_t (*get_power_limit)(nvmlDevice_t, unsigned int *); /* milliwatts */
    nvmlReturn_t (*get_throttle)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*get_cc)(nvmlDevice_t, int *, int *);
    nvmlReturn_t (*get_driver)(char *, unsigned int);
    nvmlReturn_t (*get_cuda)(int *);
};

const char *nvml_lib_path(void)
{
    const char *p = getenv("BERTC_NVML_LIB");
    return p && *p ? p : "libnvidia-ml.so.1";
}

static const char *nv_errstr(nvml_lib *nv, nvmlReturn_t r, char *buf, size_t cap)
{
    const char *s = nv->error_string ? nv->error_string(r) : NULL;
    snprintf(buf, cap, "%s (NVML error %d)", s ? s : "error", r);
    return buf;
}

int nvml_open(nvml_lib **out)
{
    *out = NULL;
    const char *path = nvml_lib_path();
    nvml_lib *nv = xcalloc(1, sizeof *nv);
    if (dynlib_open(&nv->dl, &path, 1) != 0) {
        err_set(ERR_RUNTIME, "nvml_open: cannot load %s (%s)", path, nv->dl.reason);
        free(nv);
        return ERR_RUNTIME;
    }
    /* Newer drivers export the _v2 names, old ones only the plain names;
     * the optional calls read as "not supported" when missing. The
     * throttle reasons were renamed "clocks event reasons" in 12.x drivers;
     * the old name stays exported. */
    const dynlib_sym syms[] = {
        {&nv->init, "nvmlInit_v2", "nvmlInit", 0},
        {&nv->shutdown, "nvmlShutdown", NULL, 0},
        {&nv->get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", 0},
        {&nv->get_handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", 0},
        {&nv->error_string, "nvmlErrorString", NULL, 1},
        {&nv->get_name, "nvmlDeviceGetName", NULL, 1},
        {&nv->get_uuid, "nvmlDeviceGetUUID", NULL, 1},
        {&nv->get_memory, "nvmlDeviceGetMemoryInfo", NULL, 1},
        {&nv->get_util, "nvmlDeviceGetUtilizationRates", NULL, 1},
        {&nv->get_temp, "nvmlDeviceGetTemperature", NULL, 1},
        {&nv->get_clock, "nvmlDeviceGetClockInfo", NULL, 1},
        {&nv->get_power, "nvmlDeviceGetPowerUsage", NULL, 1},
        {&nv->get_power_limit, "nvmlDeviceGetEnforcedPowerLimit", NULL, 1},
        {&nv->get_throttle, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", 1},
        {&nv->get_cc, "nvmlDeviceGetCudaComputeCapability", NULL, 1},
        {&nv->get_driver, "nvmlSystemGetDriverVersion", NULL, 1},
        {&nv->get_cuda, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion", 1},
    };
    if (dynlib_resolve(&nv->dl, syms, sizeof syms / sizeof syms[0]) != 0) {
        err_set(ERR_RUNTIME, "nvml_open: %s (not an NVML library?)", nv->dl.why);
        dynlib_close(&nv->dl);
        free(nv);
        return ERR_RUNTIME;
    }
    nvmlReturn_t r = nv->init();
    if (r != NVML_SUCCESS) {
        char eb[128];
        nv_errstr(nv, r, eb, sizeof eb);
        dynlib_close(&nv->dl);
        free(nv);
        return err_set(ERR_RUNTIME, "nvml_open: nvmlInit failed: %s", eb);
    }
    *out = nv;
    return 0;
}

void nvml_close(nvml_lib *nv)
{
    if (!nv) return;
    nv->shutdown();
    dynlib_close(&nv->dl);
    free(nv);
}

int nvml_device_count(nvml_lib *nv, int *count)
{
    unsigned int n = 0;
    *count = 0;
    nvmlReturn_t r = nv->get_count(&n);
    if (r != NVML_SUCCESS) {
        char eb[128];
        return err_set(ERR_RUNTIME, "nvml_device_count: %s", nv_errstr(nv, r, eb, sizeof eb));
    }
    *count = n > 64 ? 64 : (int)n; /* a sane bound on a value read from a driver */
    return 0;
}

static int get_handle(nvml_lib *nv, int index, nvmlDevice_t *dev)
{
    nvmlReturn_t r = nv->get_handle((unsigned int)index, dev);
    if (r != NVML_SUCCESS) {
        char eb[128];
        return err_set(ERR_RUNTIME, "nvml: GPU %d: %s", index, nv_errstr(nv, r, eb, sizeof eb));
    }
    return 0;
}

/* Records the first failure of a sample; "not supported" is not an error
 * worth a message (many boards lack some sensors) but still counts. */
static void note(nvml_lib *nv, char *err, size_t cap, int *nerr, const char *what, nvmlReturn_t r)
{
    (*nerr)++;
    if (err[0]) return;
    char eb[128];
    snprintf(err, cap, "%s: %s", what, r == -1 ? "not exported by this driver" : nv_errstr(nv, r, eb, sizeof eb));
}

#define CALL(fn, ...) ((fn) ? (fn)(__VA_ARGS__) : -1)

int nvml_device_info_get(nvml_lib *nv, int index, nvml_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->cc_major = info->cc_minor = -1;
    info->mem_total = -1;
    info->power_limit_w = -1;
    nvmlDevice_t dev;
    if (get_handle(nv, index, &dev)) return ERR_RUNTIME;
    int nerr = 0;
    nvmlReturn_t r;
    if ((r = CALL(nv->get_name, dev, info->name, sizeof info->name)) != NVML_SUCCESS) {
        info->name[0] = 0;
        note(nv, info->err, sizeof info->err, &nerr, "name", r);
    }
    info->name[sizeof info->name - 1] = 0;
    if ((r = CALL(nv->get_uuid, dev, info->uuid, sizeof info->uuid)) != NVML_SUCCESS) info->uuid[0] = 0;
    info->uuid[sizeof info->uuid - 1] = 0;
    int ma = -1, mi = -1;
    if ((r = CALL(nv->get_cc, dev, &ma, &mi)) == NVML_SUCCESS && ma >= 0 && mi >= 0) {
        info->cc_major = ma;
        info->cc_minor = mi;
    } else {
        note(nv, info->err, sizeof info->err, &nerr, "compute capability", r);
    }
    nvmlMemory_t m;
    if ((r = CALL(nv->get_memory, dev, &m)) == NVML_SUCCESS) info->mem_total = (double)m.total;
    else note(nv, info->err, sizeof info->err, &nerr, "memory", r);
    unsigned int mw;
    if ((r = CALL(nv->get_power_limit, dev, &mw)) == NVML_SUCCESS) info->power_limit_w = mw / 1000.0;
    return 0;
}

int nvml_device_sample(nvml_lib *nv, int index, nvml_sample *s)
{
    memset(s, 0, sizeof *s);
    s->util_pct = s->mem_util_pct = s->mem_used = s->mem_total = s->temp_c = NAN;
    s->sm_clock_mhz = s->mem_clock_mhz = s->power_w = s->power_limit_w = NAN;
    nvmlDevice_t dev;
    if (get_handle(nv, index, &dev)) return ERR_RUNTIME;
    nvmlReturn_t r;
    unsigned int u;
    nvmlUtilization_t ut;
    if ((r = CALL(nv->get_util, dev, &ut)) == NVML_SUCCESS) {
        s->util_pct = ut.gpu;
        s->mem_util_pct = ut.memory;
    } else {
        note(nv, s->err, sizeof s->err, &s->nerr, "utilization", r);
    }
    nvmlMemory_t m;
    if ((r = CALL(nv->get_memory, dev, &m)) == NVML_SUCCESS) {
        s->mem_used = (double)m.used;
        s->mem_total = (double)m.total;
    } else {
        note(nv, s->err, sizeof s->err, &s->nerr, "memory", r);
    }
    if ((r = CALL(nv->get_temp, dev, NVML_TEMPERATURE_GPU, &u)) == NVML_SUCCESS) s->temp_c = u;
    else note(nv, s->err, sizeof s->err, &s->nerr, "temperature", r);
    if ((r = CALL(nv->get_clock, dev, NVML_CLOCK_SM, &u)) == NVML_SUCCESS) s->sm_clock_mhz = u;
    else note(nv, s->err, sizeof s->err, &s->nerr, "SM clock", r);
    if ((r = CALL(nv->get_clock, dev, NVML_CLOCK_MEM, &u)) == NVML_SUCCESS) s->mem_clock_mhz = u;
    else note(nv, s->err, sizeof s->err, &s->nerr, "memory clock", r);
    if ((r = CALL(nv->get_power, dev, &u)) == NVML_SUCCESS) s->power_w = u / 1000.0;
    else note(nv, s->err, sizeof s->err, &s->nerr, "power", r);
    if ((r = CALL(nv->get_power_limit, dev, &u)) == NVML_SUCCESS) s->power_limit_w = u / 1000.0;
    else note(nv, s->err, sizeof s->err, &s->nerr, "power limit", r);
    unsigned long long t;
    if ((r = CALL(nv->get_throttle, dev, &t)) == NVML_SUCCESS) {
        s->throttle = t;
        s->throttle_ok = 1;
    } else {
        note(nv, s->err, sizeof s->err, &s->nerr, "throttle reasons", r);
    }
    return 0;
}

void nvml_driver_versions(nvml_lib *nv, char *driver, int cap, int *cuda_version)
{
    if (cap > 0) driver[0] = 0;
    *cuda_version = 0;
    if (cap > 1 && CALL(nv->get_driver, driver, (unsigned int)cap) != NVML_SUCCESS) driver[0] = 0;
    if (cap > 0) driver[cap - 1] = 0;
    int v = 0;
    if (CALL(nv->get_cuda, &v) == NVML_SUCCESS && v > 0 && v < 1000000) *cuda_version = v;
}

char *nvml_throttle_names(uint64_t mask, char *buf, int cap)
{
    static const struct { uint64_t bit; const char *name; } names[] = {
        {NVML_THR_GPU_IDLE, "idle"},           {NVML_THR_APP_CLOCKS, "app_clocks"},
        {NVML_THR_SW_POWER_CAP, "sw_power_cap"}, {NVML_THR_HW_SLOWDOWN, "hw_slowdown"},
        {NVML_THR_SYNC_BOOST, "sync_boost"},   {NVML_THR_SW_THERMAL, "sw_thermal"},
        {NVML_THR_HW_THERMAL, "hw_thermal"},   {NVML_THR_HW_POWER_BRAKE, "hw_power_brake"},
        {NVML_THR_DISPLAY_CLOCKS, "display_clocks"},
    };
    if (cap <= 0) return buf;
    buf[0] = 0;
    if (!mask) {
        snprintf(buf, (size_t)cap, "none");
        return buf;
    }
    size_t n = 0;
    uint64_t known = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        known |= names[i].bit;
        if (!(mask & names[i].bit)) continue;
        int w = snprintf(buf + n, (size_t)cap - n, "%s%s", n ? "+" : "", names[i].name);
        if (w < 0 || (size_t)w >= (size_t)cap - n) return buf;
        n += (size_t)w;
    }
    if (mask & ~known)
        snprintf(buf + n, (size_t)cap - n, "%s0x%llx", n ? "+" : "", (unsigned long long)(mask & ~known));
    return buf;
}
