/* oneDNN through dlopen (see onednn_dl.h). The declarations follow oneDNN's
 * C API reference (dnnl.h is not needed to build): only the calls bertc uses.
 * sgemm and the ISA calls are the same in oneDNN 2 and 3; the matmul
 * primitive (bf16) is oneDNN 2's API, whose descriptors are structs the
 * caller allocates (3 made them handles). */
#define _GNU_SOURCE
#include "backend/cpu/onednn_dl.h"

#include "backend/cpu/cpu_isa.h"
#include "core/dynlib.h"

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
static dynlib g_dl;
static onednn_lib g_lib;
static int g_rc = -1;
static char g_why[200];
static int g_max_level;

static void load_once(void)
{
    const char *env = getenv("BERTC_ONEDNN_LIB");
    const char *names[] = {env && *env ? env : "libdnnl.so.3", "libdnnl.so.2"};
    if (dynlib_open(&g_dl, names, env && *env ? 1 : 2) != 0) {
        snprintf(g_why, sizeof g_why, "%.199s", g_dl.why);
        return;
    }
    const dnnl_version_t *(*version)(void);
    int (*set_max)(unsigned);
    unsigned (*effective)(void);
    const dynlib_sym syms[] = {{&g_lib.sgemm, "dnnl_sgemm", NULL, 0},
                               {&version, "dnnl_version", NULL, 0},
                               {&set_max, "dnnl_set_max_cpu_isa", NULL, 0},
                               {&effective, "dnnl_get_effective_cpu_isa", NULL, 0}};
    if (dynlib_resolve(&g_dl, syms, sizeof syms / sizeof syms[0]) != 0) {
        snprintf(g_why, sizeof g_why, "%s lacks %s", env && *env ? env : "libdnnl.so.3 or libdnnl.so.2",
                 g_dl.missing);
        g_lib.sgemm = NULL;
        dynlib_close(&g_dl);
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
        dynlib_close(&g_dl);
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

/* ------------------------------------------------------------------------
 * bf16 products: oneDNN 2's matmul primitive. */

/* oneDNN 2 (dnnl_types.h): data types, engine kind, stream flags, arguments,
 * the query for the implementation's name, DNNL_RUNTIME_DIM_VAL. */
enum { DT_BF16 = 2, DT_F32 = 3, ENGINE_CPU = 1, STREAM_DEFAULT = 1 };
enum { ARG_SRC = 1, ARG_DST = 17, ARG_WEIGHTS = 33, QUERY_IMPL_INFO_STR = 8, TAG_AB = 3, TAG_BA = 22 };
#define RUNTIME_DIM INT64_MIN
#define MAX_NDIMS 12
/* dnnl_memory_desc_t is 696 bytes and dnnl_matmul_desc_t 2800 in oneDNN 2.6:
 * the library writes only its own size into these. */
typedef struct {
    _Alignas(16) unsigned char b[1024];
} md_t;
typedef struct {
    _Alignas(16) unsigned char b[4096];
} matmul_desc_t;
typedef struct {
    int arg;
    void *memory;
} exec_arg_t;

/* The oneDNN 2 functions bertc calls, each named once: its field of dn,
 * whose name after dnnl_ is the symbol, and its parameters (all return a
 * dnnl_status_t, 0 on success). */
#define DNNL_FUNCS(X)                                                                              \
    X(engine_create, (void **, int, size_t))                                                       \
    X(stream_create, (void **, void *, unsigned))                                                  \
    X(stream_wait, (void *))                                                                       \
    X(memory_desc_init_by_tag, (md_t *, int, const int64_t *, int, int))                           \
    X(matmul_desc_init, (matmul_desc_t *, const md_t *, const md_t *, const md_t *, const md_t *)) \
    X(primitive_attr_create, (void **))                                                            \
    X(primitive_attr_destroy, (void *))                                                            \
    X(primitive_attr_set_post_ops, (void *, const void *))                                         \
    X(post_ops_create, (void **))                                                                  \
    X(post_ops_append_sum, (void *, float))                                                        \
    X(post_ops_destroy, (void *))                                                                  \
    X(primitive_desc_create, (void **, const void *, const void *, void *, const void *))          \
    X(primitive_desc_query, (const void *, int, int, void *))                                      \
    X(primitive_desc_destroy, (void *))                                                            \
    X(primitive_create, (void **, const void *))                                                   \
    X(primitive_execute, (const void *, void *, int, const exec_arg_t *))                          \
    X(memory_create, (void **, const md_t *, void *, void *))                                      \
    X(memory_destroy, (void *))

static struct {
#define DNNL_FIELD(name, params) int(*name) params;
    DNNL_FUNCS(DNNL_FIELD)
#undef DNNL_FIELD
} dn;

static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t bf16_lock = PTHREAD_MUTEX_INITIALIZER;
static int bf16_rc = -1;
static char bf16_why[200];
static char bf16_impl[64];
static void *g_engine, *g_stream;
static void *g_prim[2][2][2]; /* [transa][transb][beta 1] */

/* A dense 2-D bf16 or f32 memory descriptor [rows, cols], row-major or
 * (trans) its transpose; RUNTIME_DIM for both sizes in the primitive. (With
 * run-time strides oneDNN 2.6 falls back to its reference loops; dense
 * layouts by tag keep its JIT GEMM.) */
static int md_2d(md_t *md, int64_t rows, int64_t cols, int trans, int dt)
{
    int64_t dims[MAX_NDIMS] = {rows, cols};
    return dn.memory_desc_init_by_tag(md, 2, dims, dt, trans ? TAG_BA : TAG_AB);
}

/* The primitive for (ta, tb, beta), made on first use; NULL when oneDNN refuses. */
static void *bf16_prim(int ta, int tb, int beta1)
{
    pthread_mutex_lock(&bf16_lock);
    void *p = g_prim[ta][tb][beta1];
    if (!p) {
        md_t a, b, c;
        matmul_desc_t d;
        void *attr = NULL, *po = NULL, *pd = NULL;
        const int64_t R = RUNTIME_DIM;
        if (md_2d(&a, R, R, ta, DT_BF16) == 0 && md_2d(&b, R, R, tb, DT_BF16) == 0 && md_2d(&c, R, R, 0, DT_F32) == 0 &&
            dn.matmul_desc_init(&d, &a, &b, NULL, &c) == 0 &&
            dn.primitive_attr_create(&attr) == 0 && dn.post_ops_create(&po) == 0 &&
            (!beta1 || dn.post_ops_append_sum(po, 1.0f) == 0) && dn.primitive_attr_set_post_ops(attr, po) == 0 &&
            dn.primitive_desc_create(&pd, &d, attr, g_engine, NULL) == 0) {
            const char *impl = NULL;
            if (!bf16_impl[0] && dn.primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, &impl) == 0 && impl)
                snprintf(bf16_impl, sizeof bf16_impl, "%s", impl);
            if (dn.primitive_create(&p, pd) != 0) p = NULL;
        }
        if (pd) dn.primitive_desc_destroy(pd);
        if (po) dn.post_ops_destroy(po);
        if (attr) dn.primitive_attr_destroy(attr);
        g_prim[ta][tb][beta1] = p;
    }
    pthread_mutex_unlock(&bf16_lock);
    return p;
}

static void bf16_init_once(void)
{
    if (g_rc != 0 || !g_dl.handle) {
        snprintf(bf16_why, sizeof bf16_why, "oneDNN is not loaded: %.170s", g_why[0] ? g_why : "onednn_load was not called");
        return;
    }
    if (strncmp(g_lib.version, "2.", 2) != 0) {
        snprintf(bf16_why, sizeof bf16_why, "bertc's bf16 products use oneDNN 2's matmul API; this is oneDNN %s",
                 g_lib.version);
        return;
    }
    const dynlib_sym syms[] = {
#define DNNL_SYM(name, params) {&dn.name, "dnnl_" #name, NULL, 0},
        DNNL_FUNCS(DNNL_SYM)
#undef DNNL_SYM
    };
    if (dynlib_resolve(&g_dl, syms, sizeof syms / sizeof syms[0]) != 0) {
        snprintf(bf16_why, sizeof bf16_why, "oneDNN %s lacks %s", g_lib.version, g_dl.missing);
        return;
    }
    if (dn.engine_create(&g_engine, ENGINE_CPU, 0) != 0 || dn.stream_create(&g_stream, g_engine, STREAM_DEFAULT) != 0) {
        snprintf(bf16_why, sizeof bf16_why, "oneDNN %s: cannot make a CPU engine and stream", g_lib.version);
        return;
    }
    if (!bf16_prim(0, 1, 0)) {
        snprintf(bf16_why, sizeof bf16_why, "oneDNN %s (%s) has no bf16 matmul for this CPU", g_lib.version, g_lib.isa);
        return;
    }
    /* Its reference loops would make bf16 many times slower than fp32. */
    if (!strncmp(bf16_impl, "ref", 3)) {
        snprintf(bf16_why, sizeof bf16_why, "oneDNN %s (%s) would run bf16 products with its reference loops (%.40s)",
                 g_lib.version, g_lib.isa, bf16_impl);
        return;
    }
    bf16_rc = 0;
}

int onednn_bf16_init(char *why, size_t cap)
{
    pthread_once(&bf16_once, bf16_init_once);
    if (bf16_rc != 0 && why && cap) snprintf(why, cap, "%s", bf16_why);
    return bf16_rc;
}

const char *onednn_bf16_impl(void)
{
    return bf16_rc == 0 ? bf16_impl : "";
}

int onednn_gemm_bf16(int transa, int transb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda,
                     const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (bf16_rc != 0 || (beta != 0.0f && beta != 1.0f)) return -1;
    if (lda != (transa ? M : K) || ldb != (transb ? K : N) || ldc != N) return -1; /* dense only */
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {
        for (int64_t i = 0; i < M && beta == 0.0f; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return 0;
    }
    void *p = bf16_prim(transa != 0, transb != 0, beta != 0.0f);
    if (!p) return -1;
    md_t a, b, c;
    void *ma = NULL, *mb = NULL, *mc = NULL;
    int rc = -1;
    if (md_2d(&a, M, K, transa, DT_BF16) == 0 && md_2d(&b, K, N, transb, DT_BF16) == 0 &&
        md_2d(&c, M, N, 0, DT_F32) == 0 && dn.memory_create(&ma, &a, g_engine, (void *)A) == 0 &&
        dn.memory_create(&mb, &b, g_engine, (void *)B) == 0 && dn.memory_create(&mc, &c, g_engine, C) == 0) {
        exec_arg_t args[3] = {{ARG_SRC, ma}, {ARG_WEIGHTS, mb}, {ARG_DST, mc}};
        rc = dn.primitive_execute(p, g_stream, 3, args) == 0 && dn.stream_wait(g_stream) == 0 ? 0 : -1;
    }
    if (ma) dn.memory_destroy(ma);
    if (mb) dn.memory_destroy(mb);
    if (mc) dn.memory_destroy(mc);
    return rc;
}
