/* oneDNN through dlopen (see onednn_dl.h). The declarations follow oneDNN's
 * C API reference (dnnl.h is not needed to build): only the calls bertc uses,
 * whose signatures and the ISA codes below are the same in oneDNN 2 and 3. */
#define _GNU_SOURCE
#include "backend/cpu/onednn_dl.h"

#include "backend/cpu_kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;

/* dnnl_cpu_isa_t values */
enum { ISA_ALL = 0x0, ISA_SSE41 = 0x1, ISA_AVX = 0x3, ISA_AVX2 = 0x7 };

static const struct {
    unsigned code;
    const char *name;
} isa_names[] = {
    {0x1, "sse41"},        {0x3, "avx"},
    {0x7, "avx2"},         {0xf, "avx2_vnni"},
    {0x27, "avx512_core"}, {0x67, "avx512_core_vnni"},
    {0xe7, "avx512_core_bf16"},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static onednn_lib g_lib;
static int g_rc = -1;
static char g_why[200];
static int g_max_level;

/* The library file tried: BERTC_ONEDNN_LIB, else libdnnl.so.3, then libdnnl.so.2. */
static const char *lib_names(void)
{
    const char *p = getenv("BERTC_ONEDNN_LIB");
    return p && *p ? p : "libdnnl.so.3 or libdnnl.so.2";
}

static void load_once(void)
{
    const char *env = getenv("BERTC_ONEDNN_LIB");
    const char *names[] = {env && *env ? env : "libdnnl.so.3", env && *env ? NULL : "libdnnl.so.2"};
    void *dl = NULL;
    const char *err = NULL;
    for (int i = 0; i < 2 && !dl && names[i]; i++) {
        dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!dl) err = dlerror();
    }
    if (!dl) {
        snprintf(g_why, sizeof g_why, "cannot load %s (%.120s)", lib_names(), err ? err : "unknown reason");
        return;
    }
    const dnnl_version_t *(*version)(void);
    int (*set_max)(unsigned);
    unsigned (*effective)(void);
    /* POSIX lets dlsym's void * convert to a function pointer; memcpy keeps -Wpedantic quiet. */
#define LOAD(fn, name)                      \
    do {                                    \
        void *p_ = dlsym(dl, name);         \
        memcpy(&(fn), &p_, sizeof p_);      \
    } while (0)
    LOAD(g_lib.sgemm, "dnnl_sgemm");
    LOAD(version, "dnnl_version");
    LOAD(set_max, "dnnl_set_max_cpu_isa");
    LOAD(effective, "dnnl_get_effective_cpu_isa");
#undef LOAD
    if (!g_lib.sgemm || !version || !set_max || !effective) {
        snprintf(g_why, sizeof g_why, "%s lacks dnnl_sgemm, dnnl_version or the ISA calls", lib_names());
        g_lib.sgemm = NULL;
        dlclose(dl);
        return;
    }
    /* The cap goes in before any other call: oneDNN fixes its ISA at first use. */
    unsigned cap = g_max_level >= CPU_ISA_AVX512 ? ISA_ALL
                   : g_max_level == CPU_ISA_AVX2 ? ISA_AVX2
                   : g_max_level == CPU_ISA_AVX  ? ISA_AVX
                                                 : ISA_SSE41;
    if (cap != ISA_ALL && set_max(cap) != 0) {
        snprintf(g_why, sizeof g_why, "oneDNN refused the ISA cap %s", cpu_isa_name((cpu_isa_level)g_max_level));
        g_lib.sgemm = NULL;
        dlclose(dl);
        return;
    }
    const dnnl_version_t *v = version();
    if (v) snprintf(g_lib.version, sizeof g_lib.version, "%d.%d.%d", v->major, v->minor, v->patch);
    unsigned code = effective();
    snprintf(g_lib.isa, sizeof g_lib.isa, "isa code 0x%x", code);
    for (size_t i = 0; i < sizeof isa_names / sizeof isa_names[0]; i++)
        if (isa_names[i].code == code) snprintf(g_lib.isa, sizeof g_lib.isa, "%s", isa_names[i].name);
    g_rc = 0; /* the library stays loaded for the life of the process */
}

int onednn_load(onednn_lib *out, int max_level, char *why, size_t cap)
{
    g_max_level = max_level; /* read by the first call only */
    pthread_once(&once, load_once);
    if (g_rc != 0) {
        if (why && cap) snprintf(why, cap, "%s", g_why);
        return -1;
    }
    *out = g_lib;
    return 0;
}
