/* A stand-in for libnvidia-ml.so.1, so that bertc's GPU monitoring code runs
 * in CI where no NVIDIA driver exists. It exports the NVML calls bertc makes,
 * with NVIDIA's documented signatures, and answers from the environment:
 *
 *   FAKENVML_INIT=N        nvmlInit returns error N (9 = driver not loaded)
 *   FAKENVML_DEVICES=N     number of GPUs (default 1, at most 8)
 *   FAKENVML_NAME=S        device name (default "Fake Tesla T4")
 *   FAKENVML_CC=M.m        compute capability (default 7.5)
 *   FAKENVML_MEM_GIB=X     memory size (default 15)
 *   FAKENVML_DELAY_MS=N    the utilisation query takes N ms (a slow driver)
 *   FAKENVML_FAIL=q=N,...  query q returns error N (999 = unknown when no =N);
 *                          q is one of name uuid cc memory utilization
 *                          temperature clock power power_limit throttle
 *                          driver cuda handle count
 *
 * Readings change from call to call (utilisation, memory, temperature,
 * power, throttle reasons) so a monitor sees a moving series. Every call
 * before nvmlInit or after nvmlShutdown returns NVML_ERROR_UNINITIALIZED,
 * as the real library does. Not part of bertc: built only for the tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, E_UNINIT = 1, E_INVALID = 2, E_NOT_SUPPORTED = 3, E_UNKNOWN = 999 };

struct nvmlDevice_st { int index; };
static struct nvmlDevice_st devices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static int inited;
static unsigned long calls[8];

static const char *env(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* The error FAKENVML_FAIL asks for query q, or 0. */
static nvmlReturn_t failure(const char *q)
{
    const char *list = getenv("FAKENVML_FAIL");
    if (!list) return OK;
    size_t ql = strlen(q);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= ql && !strncmp(p, q, ql) && (n == ql || p[ql] == '=')) return n == ql ? E_UNKNOWN : atoi(p + ql + 1);
        p += n + (end ? 1 : 0);
    }
    return OK;
}

static int ndevices(void)
{
    int n = atoi(env("FAKENVML_DEVICES", "1"));
    return n < 0 ? 0 : n > 8 ? 8 : n;
}

#define GUARD(q)                                  \
    do {                                          \
        if (!inited) return E_UNINIT;             \
        nvmlReturn_t f_ = failure(q);             \
        if (f_) return f_;                        \
    } while (0)
#define DEV_OK(d) ((d) && (d) >= devices && (d) < devices + ndevices())

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    int r = atoi(env("FAKENVML_INIT", "0"));
    if (r) return r;
    inited++;
    memset(calls, 0, sizeof calls);
    return OK;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!inited) return E_UNINIT;
    inited--;
    return OK;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case OK: return "Success";
    case E_UNINIT: return "Uninitialized";
    case E_INVALID: return "Invalid Argument";
    case E_NOT_SUPPORTED: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    GUARD("count");
    if (!n) return E_INVALID;
    *n = (unsigned int)ndevices();
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    GUARD("handle");
    if (!d || i >= (unsigned int)ndevices()) return E_INVALID;
    *d = &devices[i];
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    GUARD("name");
    if (!DEV_OK(d) || !name || len == 0) return E_INVALID;
    snprintf(name, len, "%s", env("FAKENVML_NAME", "Fake Tesla T4"));
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
    GUARD("uuid");
    if (!DEV_OK(d) || !uuid || len == 0) return E_INVALID;
    snprintf(uuid, len, "GPU-fake0000-0000-0000-0000-00000000000%d", d->index);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    GUARD("cc");
    if (!DEV_OK(d) || !major || !minor) return E_INVALID;
    const char *cc = env("FAKENVML_CC", "7.5");
    *major = atoi(cc);
    const char *dot = strchr(cc, '.');
    *minor = dot ? atoi(dot + 1) : 0;
    return OK;
}

static unsigned long long mem_total(void)
{
    return (unsigned long long)(atof(env("FAKENVML_MEM_GIB", "15")) * 1073741824.0);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    GUARD("memory");
    if (!DEV_OK(d) || !m) return E_INVALID;
    unsigned long k = calls[d->index]++;
    m->total = mem_total();
    m->used = (512ull << 20) + (k % 40) * (256ull << 20);
    if (m->used > m->total) m->used = m->total;
    m->free = m->total - m->used;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    GUARD("utilization");
    if (!DEV_OK(d) || !u) return E_INVALID;
    long ms = atol(env("FAKENVML_DELAY_MS", "0"));
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    unsigned long k = calls[d->index];
    u->gpu = (unsigned int)((37 + 13 * k) % 101);
    u->memory = u->gpu / 2;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    GUARD("temperature");
    if (!DEV_OK(d) || !t || sensor != 0) return E_INVALID;
    *t = (unsigned int)(40 + calls[d->index] % 30);
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
    GUARD("clock");
    if (!DEV_OK(d) || !mhz || type < 0 || type > 3) return E_INVALID;
    *mhz = type == 2 ? 5000 : 1590;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    GUARD("power");
    if (!DEV_OK(d) || !mw) return E_INVALID;
    *mw = (unsigned int)(30000 + 1000 * (calls[d->index] % 40));
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    GUARD("power_limit");
    if (!DEV_OK(d) || !mw) return E_INVALID;
    *mw = 70000;
    return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r)
{
    GUARD("throttle");
    if (!DEV_OK(d) || !r) return E_INVALID;
    *r = calls[d->index] % 3 == 0 ? 0x4ull : 0;
    return OK;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
    return nvmlDeviceGetCurrentClocksThrottleReasons(d, r);
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
    GUARD("driver");
    if (!v || len == 0) return E_INVALID;
    snprintf(v, len, "535.104.05");
    return OK;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    GUARD("cuda");
    if (!v) return E_INVALID;
    *v = 12020;
    return OK;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }
