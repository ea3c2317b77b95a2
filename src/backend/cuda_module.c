/* Finding and loading the CUDA module (cuda_module.h). */
#define _GNU_SOURCE
#include "backend/cuda_module.h"

#include "core/dynlib.h"
#include "core/err.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;
static int mod_tried;
static const bertc_cuda_api *mod_api;
static int mod_from_file; /* 1: loaded with dlopen; 0: cuda_module_use */
static char mod_why[768];
static char mod_path[PATH_MAX + 64];

static int host_err_set(int code, const char *msg) { return err_set(code, "%s", msg); }
static int host_err_wrap(int code, const char *prefix) { return err_wrap(code, "%s", prefix); }

static const bertc_cuda_host host = {host_err_set, host_err_wrap, err_msg, select_auto_precision};

static int from_env(void)
{
    const char *e = getenv("BERTC_CUDA_MODULE");
    return e && *e;
}

const char *cuda_module_path(void)
{
    pthread_mutex_lock(&mod_lock);
    if (!mod_path[0]) {
        const char *e = getenv("BERTC_CUDA_MODULE");
        if (e && *e) {
            /* dlopen searches the library path for a bare name; a file here is meant */
            snprintf(mod_path, sizeof mod_path, "%s%s", strchr(e, '/') ? "" : "./", e);
        } else {
            char exe[PATH_MAX];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) {
                exe[n] = 0;
                char *slash = strrchr(exe, '/');
                if (slash) *slash = 0;
                snprintf(mod_path, sizeof mod_path, "%s/%s", exe[0] ? exe : "", BERTC_CUDA_MODULE_FILE);
            } else {
                snprintf(mod_path, sizeof mod_path, "%s", BERTC_CUDA_MODULE_FILE);
            }
        }
    }
    pthread_mutex_unlock(&mod_lock);
    return mod_path;
}

int cuda_module_built(void)
{
#ifdef BERTC_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int cuda_driver_present(void)
{
    return access("/proc/driver/nvidia", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0 ||
           access("/dev/dxg", F_OK) == 0;
}

/* 0 when path is a file worth giving to dlopen; else the reason in why. */
static int check_file(const char *path, char *why, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT && from_env())
            snprintf(why, cap, "%s not found (named by BERTC_CUDA_MODULE)", path);
        else if (e == ENOENT && cuda_module_built())
            snprintf(why, cap, "%s not found (it is built next to the bertc binary and must stay there; "
                               "BERTC_CUDA_MODULE names another file)", path);
        else if (e == ENOENT)
            snprintf(why, cap, "this build has no CUDA backend (nvcc was not found when it was built; no module at %s)",
                     path);
        else snprintf(why, cap, "%s: %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, cap, "%s is not a file", path);
        return -1;
    }
    return 0;
}

static const bertc_cuda_api *load_locked(const char *path)
{
    if (check_file(path, mod_why, sizeof mod_why)) return NULL;
    dynlib dl;
    if (dynlib_open(&dl, &path, 1) != 0) {
        const char *e = dl.reason;
        size_t n = strlen(path);
        if (!strncmp(e, path, n) && !strncmp(e + n, ": ", 2)) e += n + 2; /* the path once is enough */
        snprintf(mod_why, sizeof mod_why, "cannot load %s: %s", path, e);
        return NULL;
    }
    bertc_cuda_entry_fn entry;
    const dynlib_sym sym = {&entry, BERTC_CUDA_ENTRY, NULL, 0};
    if (dynlib_resolve(&dl, &sym, 1) != 0) {
        snprintf(mod_why, sizeof mod_why, "%s (not a bertc CUDA module)", dl.why);
        dynlib_close(&dl);
        return NULL;
    }
    const bertc_cuda_api *api = entry(BERTC_CUDA_ABI, &host);
    if (!api) {
        snprintf(mod_why, sizeof mod_why, "%s: %s returned nothing", path, BERTC_CUDA_ENTRY);
        dynlib_close(&dl);
        return NULL;
    }
    if (api->abi != BERTC_CUDA_ABI) {
        snprintf(mod_why, sizeof mod_why,
                 "%s: ABI mismatch: the module has ABI %d, this bertc %s has ABI %d (use the module built with "
                 "this bertc)",
                 path, api->abi, BERTC_VERSION, BERTC_CUDA_ABI);
        dynlib_close(&dl);
        return NULL;
    }
    if (api->size != sizeof(bertc_cuda_api) || api->backend_i_size != sizeof(backend_i) ||
        api->backend_mem_size != sizeof(backend_mem)) {
        snprintf(mod_why, sizeof mod_why,
                 "%s: ABI mismatch: the module's tables are %zu/%zu/%zu bytes, this bertc's %zu/%zu/%zu (built from "
                 "other sources: rebuild the module)",
                 path, api->size, api->backend_i_size, api->backend_mem_size, sizeof(bertc_cuda_api), sizeof(backend_i),
                 sizeof(backend_mem));
        dynlib_close(&dl);
        return NULL;
    }
    /* Never closed: the CUDA runtime inside keeps threads and exit handlers. */
    mod_why[0] = 0;
    mod_from_file = 1;
    return api;
}

const bertc_cuda_api *cuda_module_load(void)
{
    const char *path = cuda_module_path();
    pthread_mutex_lock(&mod_lock);
    if (!mod_tried) {
        mod_tried = 1;
        mod_api = load_locked(path);
    }
    const bertc_cuda_api *api = mod_api;
    pthread_mutex_unlock(&mod_lock);
    return api;
}

const bertc_cuda_api *cuda_module_loaded(void)
{
    pthread_mutex_lock(&mod_lock);
    const bertc_cuda_api *api = mod_api;
    pthread_mutex_unlock(&mod_lock);
    return api;
}

const char *cuda_module_why(void)
{
    return mod_why;
}

void cuda_module_use(const bertc_cuda_api *api)
{
    pthread_mutex_lock(&mod_lock);
    mod_tried = 1;
    mod_api = api;
    mod_from_file = 0;
    mod_why[0] = 0;
    if (!api) snprintf(mod_why, sizeof mod_why, "no CUDA backend was given");
    pthread_mutex_unlock(&mod_lock);
}

const bertc_cuda_api *cuda_module_get(int force, char *why, size_t cap)
{
    const bertc_cuda_api *api = cuda_module_loaded();
    if (api) return api;
    const char *path = cuda_module_path();
    if (!force) {
        if (check_file(path, why, cap)) return NULL;
        if (!cuda_driver_present()) {
            snprintf(why, cap, "no NVIDIA driver: none of /proc/driver/nvidia, /dev/nvidiactl, /dev/dxg exists");
            return NULL;
        }
    }
    api = cuda_module_load();
    if (!api) snprintf(why, cap, "%s", cuda_module_why());
    return api;
}

char *cuda_module_describe(char *buf, size_t cap, int load)
{
    if (!cap) return buf;
    const char *path = cuda_module_path();
    char why[768];
    const bertc_cuda_api *api = cuda_module_get(load, why, sizeof why);
    if (!api) {
        char tmp[8];
        if (!load && !cuda_driver_present() && !check_file(path, tmp, sizeof tmp))
            snprintf(buf, cap, "%s: found; not loaded (no NVIDIA driver; `bertc devices` loads it)", path);
        else snprintf(buf, cap, "not available: %s", why);
        return buf;
    }
    int cu = api->cuda_runtime;
    if (mod_from_file)
        snprintf(buf, cap, "%s: loaded (ABI %d, bertc %s, CUDA runtime %d.%d)", path, api->abi, api->version, cu / 1000,
                 (cu % 1000) / 10);
    else snprintf(buf, cap, "linked in (ABI %d, CUDA runtime %d.%d)", api->abi, cu / 1000, (cu % 1000) / 10);
    return buf;
}
