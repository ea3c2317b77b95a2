/* cudaemu's runtime: the emulated card (CUDAEMU_DEVICE), device memory with
 * a registry, guard zones, the NaN fill and a cap (CUDAEMU_MEM_LIMIT), the
 * memory calls, streams and events (synchronous), errors. */
#include "cuda_runtime_api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <mutex>
#include <string>

#ifdef CUDAEMU_RACECHECK
/* cudaemu_race.cc: device memory comes from the race detector's region
 * (its shadow lies at a fixed distance); written bytes are recorded. */
extern "C" char *cudaemu_race_alloc(size_t bytes);
extern "C" void cudaemu_race_free(char *raw, size_t bytes);
extern "C" void cudaemu_race_mark(const void *p, size_t bytes);
#endif

/* ------------------------------------------------------------------------
 * The card. */

typedef struct {
    const char *key, *name;
    int major, minor, sms;
    size_t mem;
} card;

static const card cards[] = {
    {"t4", "Tesla T4", 7, 5, 40, 15843721216ull},
    {"a100", "NVIDIA A100-SXM4-40GB", 8, 0, 108, 42298834944ull},
    {"h100", "NVIDIA H100 80GB HBM3", 9, 0, 132, 85029158912ull},
};

static const card *the_card(void)
{
    static const card *c;
    if (c) return c;
    const char *e = getenv("CUDAEMU_DEVICE");
    if (!e || !*e) e = "t4";
    for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++)
        if (!strcmp(e, cards[i].key)) return c = &cards[i];
    cudaemu_fatal("CUDAEMU_DEVICE=%s: unknown card (t4, a100 or h100)", e);
}

/* The card's memory, or less under CUDAEMU_MEM_LIMIT (bytes, or with a
 * KiB/MiB/GiB suffix). */
static size_t mem_total(void)
{
    static size_t total;
    if (total) return total;
    size_t t = the_card()->mem;
    const char *e = getenv("CUDAEMU_MEM_LIMIT");
    if (e && *e) {
        char *end;
        errno = 0;
        double v = strtod(e, &end);
        double mul = !strcmp(end, "") ? 1 : !strcmp(end, "KiB") ? 1024.0 : !strcmp(end, "MiB") ? 1048576.0
                   : !strcmp(end, "GiB") ? 1073741824.0 : -1;
        if (errno || v <= 0 || mul < 0)
            cudaemu_fatal("CUDAEMU_MEM_LIMIT=%s: not a size (bytes, or a number with KiB, MiB or GiB)", e);
        if (v * mul < (double)t) t = (size_t)(v * mul);
    }
    return total = t;
}

extern "C" void cudaemu_card_cc(int *major, int *minor)
{
    *major = the_card()->major;
    *minor = the_card()->minor;
}

/* ------------------------------------------------------------------------
 * Errors. */

static __thread cudaError_t last_error;

extern "C" void cudaemu_set_last_error(cudaError_t e)
{
    last_error = e;
}

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unrecognized error code";
}

/* ------------------------------------------------------------------------
 * The device. */

static int current_device;

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count) return fail(cudaErrorInvalidValue);
    the_card();
    *count = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *device)
{
    if (!device) return fail(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value) return fail(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice);
    const card *c = the_card();
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = c->sms; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = c->major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = c->minor; return cudaSuccess;
    }
    return fail(cudaErrorInvalidValue);
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop) return fail(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice);
    const card *c = the_card();
    memset(prop, 0, sizeof *prop);
    /* The name says what it is: no report may take it for a real GPU. */
    snprintf(prop->name, sizeof prop->name, "%s (cudaemu: emulated on the CPU)", c->name);
    prop->totalGlobalMem = mem_total();
    prop->sharedMemPerBlock = 48 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->major = c->major;
    prop->minor = c->minor;
    prop->multiProcessorCount = c->sms;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

/* ------------------------------------------------------------------------
 * Device memory: every allocation is [guard | bytes rounded to 256 | guard]
 * in host memory, registered by its address. Freed ranges are remembered
 * (the last 65536) so that a use after free is named as one. */

#define GUARD_BYTE 0xA5

namespace {
struct alloc_rec {
    char *raw;
    size_t bytes, rounded;
};
std::mutex mu;
std::map<uintptr_t, alloc_rec> live; /* by the user address */
enum { FREED_KEEP = 65536 };
struct freed_rec {
    uintptr_t p;
    size_t bytes;
};
freed_rec freed[FREED_KEEP];
size_t nfreed;
size_t used, peak;
/* The annotated tensors (CUDAEMU_ANNOTATE_SUBBUFFER), by their start. */
struct sub_rec {
    size_t bytes;
    std::string name;
};
std::map<uintptr_t, sub_rec> subs;
} // namespace

static size_t round256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (!p) return fail(cudaErrorInvalidValue);
    *p = NULL;
    if (!bytes) return cudaSuccess;
    size_t r = round256(bytes);
    if (r < bytes) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lock(mu);
    if (r > mem_total() || used > mem_total() - r) return fail(cudaErrorMemoryAllocation);
#ifdef CUDAEMU_RACECHECK
    char *raw = cudaemu_race_alloc(r + 2 * CUDAEMU_GUARD);
#else
    char *raw = (char *)aligned_alloc(256, r + 2 * CUDAEMU_GUARD);
#endif
    if (!raw) return fail(cudaErrorMemoryAllocation);
    memset(raw, GUARD_BYTE, CUDAEMU_GUARD);
    memset(raw + CUDAEMU_GUARD, CUDAEMU_FILL, bytes);
    memset(raw + CUDAEMU_GUARD + bytes, GUARD_BYTE, r - bytes + CUDAEMU_GUARD); /* the rounding is guard too */
    char *u = raw + CUDAEMU_GUARD;
    live[(uintptr_t)u] = alloc_rec{raw, bytes, r};
    used += r;
    if (used > peak) peak = used;
    *p = u;
    return cudaSuccess;
}

/* The live allocation holding p (mu held), or NULL. */
static const alloc_rec *find_live(uintptr_t p, uintptr_t *base)
{
    auto it = live.upper_bound(p);
    if (it == live.begin()) return NULL;
    --it;
    if (p >= it->first && p < it->first + it->second.bytes) {
        *base = it->first;
        return &it->second;
    }
    /* one past the end counts for bytes == 0 checks only through the caller */
    *base = it->first;
    return p == it->first + it->second.bytes ? &it->second : NULL;
}

extern "C" int cudaemu_is_device(const void *p)
{
    std::lock_guard<std::mutex> lock(mu);
    uintptr_t base;
    const alloc_rec *r = find_live((uintptr_t)p, &base);
    return r && (uintptr_t)p < base + r->bytes;
}

extern "C" void cudaemu_check_device(const void *p, size_t bytes, const char *who, const char *what)
{
    uintptr_t a = (uintptr_t)p, base = 0;
    mu.lock();
    const alloc_rec *r = find_live(a, &base);
    if (r && a < base + r->bytes && (bytes == 0 || bytes <= base + r->bytes - a)) {
        mu.unlock();
        return;
    }
    size_t rb = r ? r->bytes : 0;
    int was_freed = 0;
    if (!r) {
        size_t n = nfreed < (size_t)FREED_KEEP ? nfreed : (size_t)FREED_KEEP;
        for (size_t i = 0; i < n && !was_freed; i++) {
            const freed_rec *f = &freed[(nfreed - 1 - i) % FREED_KEEP];
            was_freed = a >= f->p && a < f->p + f->bytes;
        }
    }
    mu.unlock();
    if (!p) cudaemu_fatal("%s: %s is NULL where device memory belongs", who, what);
    if (r && a < base + rb)
        cudaemu_fatal("%s: %s reaches %zu bytes from %p, past the end of its device allocation of %zu bytes at %p "
                      "(%zu bytes over)",
                      who, what, bytes, p, rb, (void *)base, (size_t)(a + bytes - (base + rb)));
    if (r)
        cudaemu_fatal("%s: %s (%p) is one past the end of the device allocation of %zu bytes at %p", who, what, p, rb,
                      (void *)base);
    if (was_freed) cudaemu_fatal("%s: %s (%p) points into device memory that was freed", who, what, p);
    cudaemu_fatal("%s: %s (%p) is not device memory (a host pointer?)", who, what, p);
}

extern "C" cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    std::unique_lock<std::mutex> lock(mu);
    auto it = live.find((uintptr_t)p);
    if (it == live.end()) {
        lock.unlock();
        cudaemu_check_device(p, 0, "cudaFree", "the pointer"); /* names what it is */
        cudaemu_fatal("cudaFree: %p is inside a device allocation, not the start of one", p);
    }
    alloc_rec r = it->second;
    live.erase(it);
    subs.erase(subs.lower_bound((uintptr_t)p), subs.lower_bound((uintptr_t)p + r.bytes));
    used -= r.rounded;
    freed[nfreed % FREED_KEEP] = freed_rec{(uintptr_t)p, r.bytes};
    nfreed++;
    lock.unlock();
#ifdef CUDAEMU_RACECHECK
    cudaemu_race_free(r.raw, r.rounded + 2 * CUDAEMU_GUARD);
#else
    free(r.raw);
#endif
    return cudaSuccess;
}

extern "C" void cudaemu_annotate_subbuffer(const void *p, size_t bytes, const char *name)
{
    uintptr_t a = (uintptr_t)p, base = 0;
    std::unique_lock<std::mutex> lock(mu);
    const alloc_rec *r = find_live(a, &base);
    if (!bytes) return;
    if (!r || a >= base + r->bytes || bytes > base + r->bytes - a) {
        lock.unlock();
        cudaemu_check_device(p, bytes, "CUDAEMU_ANNOTATE_SUBBUFFER", name ? name : "the tensor"); /* stops */
        return;
    }
    /* a later annotation replaces what it overlaps */
    auto it = subs.lower_bound(a);
    if (it != subs.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second.bytes > a) it = prev;
    }
    while (it != subs.end() && it->first < a + bytes) it = subs.erase(it);
    subs[a] = sub_rec{bytes, name ? name : "?"};
}

extern "C" int cudaemu_tensor_of(const void *p, uintptr_t *lo, uintptr_t *hi, char *name, size_t cap)
{
    uintptr_t a = (uintptr_t)p, base = 0;
    std::lock_guard<std::mutex> lock(mu);
    const alloc_rec *r = find_live(a, &base);
    if (!r || a >= base + r->bytes) return 0;
    auto it = subs.upper_bound(a);
    if (it != subs.begin()) {
        --it;
        if (a < it->first + it->second.bytes) {
            *lo = it->first;
            *hi = it->first + it->second.bytes;
            if (cap) snprintf(name, cap, "%s", it->second.name.c_str());
            return 1;
        }
    }
    *lo = base;
    *hi = base + r->bytes;
    if (cap) name[0] = 0;
    return 1;
}

/* The allocation holding or nearest below p, for naming an address in a
 * report: 1 and its start and size when p is inside one, 2 when p is in
 * the guard zone or rounding after one, 0 otherwise. */
extern "C" int cudaemu_alloc_near(const void *p, uintptr_t *base, size_t *bytes)
{
    std::lock_guard<std::mutex> lock(mu);
    uintptr_t a = (uintptr_t)p;
    auto it = live.upper_bound(a);
    if (it != live.begin()) {
        --it;
        *base = it->first;
        *bytes = it->second.bytes;
        if (a < it->first + it->second.bytes) return 1;
        if (a < it->first + it->second.rounded + CUDAEMU_GUARD) return 2;
    }
    it = live.upper_bound(a);
    if (it != live.end() && a + CUDAEMU_GUARD >= it->first) {
        *base = it->first;
        *bytes = it->second.bytes;
        return 3; /* the guard zone before it */
    }
    return 0;
}

extern "C" void cudaemu_mark_written(const void *p, size_t bytes)
{
#ifdef CUDAEMU_RACECHECK
    cudaemu_race_mark(p, bytes);
#else
    (void)p;
    (void)bytes;
#endif
}

static int guard_ok(const alloc_rec *r)
{
    const unsigned char *lo = (const unsigned char *)r->raw, *hi = lo + CUDAEMU_GUARD + r->bytes;
    size_t nhi = r->rounded - r->bytes + CUDAEMU_GUARD;
    for (size_t i = 0; i < CUDAEMU_GUARD; i++)
        if (lo[i] != GUARD_BYTE) return 0;
    for (size_t i = 0; i < nhi; i++)
        if (hi[i] != GUARD_BYTE) return 0;
    return 1;
}

/* 1 and the allocation when some allocation's guard zone was overwritten. */
extern "C" int cudaemu_guard_damage(const void **base, size_t *bytes)
{
    std::lock_guard<std::mutex> lock(mu);
    for (auto &kv : live)
        if (!guard_ok(&kv.second)) {
            *base = (const void *)kv.first;
            *bytes = kv.second.bytes;
            return 1;
        }
    return 0;
}

extern "C" void cudaemu_check_guards(const char *after)
{
    const void *base;
    size_t bytes;
    if (cudaemu_guard_damage(&base, &bytes))
        cudaemu_fatal("%s wrote outside the device allocation of %zu bytes at %p (a guard zone was overwritten)", after,
                      bytes, base);
}

extern "C" size_t cudaemu_mem_used(void)
{
    std::lock_guard<std::mutex> lock(mu);
    return used;
}

extern "C" size_t cudaemu_mem_peak(void)
{
    std::lock_guard<std::mutex> lock(mu);
    return peak;
}

extern "C" void cudaemu_mem_reset_peak(void)
{
    std::lock_guard<std::mutex> lock(mu);
    peak = used;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(mu);
    *total_bytes = mem_total();
    *free_bytes = mem_total() - used;
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    if (!bytes) return cudaSuccess;
    if (kind == cudaMemcpyDefault)
        kind = cudaemu_is_device(dst) ? (cudaemu_is_device(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (cudaemu_is_device(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    int dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
    if (!dst || !src) return fail(cudaErrorInvalidValue);
    if (dev_dst) cudaemu_check_device(dst, bytes, "cudaMemcpy", "the destination");
    else if (cudaemu_is_device(dst)) cudaemu_fatal("cudaMemcpy: the destination %p is device memory, but the copy's kind says host", dst);
    if (dev_src) cudaemu_check_device(src, bytes, "cudaMemcpy", "the source");
    else if (cudaemu_is_device(src)) cudaemu_fatal("cudaMemcpy: the source %p is device memory, but the copy's kind says host", src);
    memmove(dst, src, bytes);
    if (dev_dst) cudaemu_mark_written(dst, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    if (!cudaemu_valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    return cudaMemcpy(dst, src, bytes, kind);
}

extern "C" cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    if (!bytes) return cudaSuccess;
    cudaemu_check_device(p, bytes, "cudaMemset", "the destination");
    memset(p, value, bytes);
    cudaemu_mark_written(p, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    if (!cudaemu_valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
    return cudaMemset(p, value, bytes);
}

/* ------------------------------------------------------------------------
 * Streams and events: handles with a tag, checked where they are used;
 * every call has completed when it returns, so waiting is a no-op. */

struct CUstream_st {
    unsigned tag;
};
struct CUevent_st {
    unsigned tag;
};
#define STREAM_TAG 0x57a3e11u
#define EVENT_TAG 0xe7e47u

extern "C" int cudaemu_valid_stream(cudaStream_t s)
{
    return !s || s->tag == STREAM_TAG;
}

/* Streams and events are tagged handles: a destroyed or foreign one is
 * refused as the runtime refuses it. */
template <class H> static cudaError_t handle_create(H **out, unsigned flags, unsigned allowed, unsigned tag)
{
    if (!out || (flags & ~allowed)) return fail(cudaErrorInvalidValue);
    *out = new H{tag};
    return cudaSuccess;
}

template <class H> static cudaError_t handle_destroy(H *h, unsigned tag)
{
    if (!h || h->tag != tag) return fail(cudaErrorInvalidResourceHandle);
    h->tag = 0;
    delete h;
    return cudaSuccess;
}

/* cudaKINDCreateWithFlags (flags outside ALLOWED refused), cudaKINDCreate,
 * cudaKINDDestroy for the stream and event handles. */
#define TAGGED_HANDLE_API(Kind, handle_t, allowed, tag)                                                    \
    extern "C" cudaError_t cuda##Kind##CreateWithFlags(handle_t *h, unsigned flags)                       \
    {                                                                                                  \
        return handle_create(h, flags, allowed, tag);                                                  \
    }                                                                                                  \
    extern "C" cudaError_t cuda##Kind##Create(handle_t *h) { return cuda##Kind##CreateWithFlags(h, 0); } \
    extern "C" cudaError_t cuda##Kind##Destroy(handle_t h) { return handle_destroy(h, tag); }
TAGGED_HANDLE_API(Stream, cudaStream_t, 1u, STREAM_TAG)
TAGGED_HANDLE_API(Event, cudaEvent_t, 0xfu, EVENT_TAG)

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return cudaemu_valid_stream(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

static int valid_event(cudaEvent_t e)
{
    return e && e->tag == EVENT_TAG;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    return cudaemu_valid_stream(s) && valid_event(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    return valid_event(e) && cudaemu_valid_stream(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    return valid_event(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
    return valid_event(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
