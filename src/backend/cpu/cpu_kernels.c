/* CPU kernel choice from CPUID and XCR0 (see backend/cpu_kernels.h). */
#include "backend/cpu_kernels.h"

#include "backend/cpu/gemm_fixed.h"
#include "backend/cpu/onednn_dl.h"
#include "core/err.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Environment variables bertc sets for the program it executes again. */
#define ENV_CORE "BERTC_BLAS_CORE"         /* the core bertc put in OPENBLAS_CORETYPE */
#define ENV_FALLBACK "BERTC_BLAS_FALLBACK" /* OpenBLAS's own pick that bertc overrode */
#define ENV_REEXEC "BERTC_KERNELS_REEXEC"  /* set for the one re-execution */

static cpu_kernels_state g_state;

/* OpenBLAS's x86-64 core names (its DYNAMIC_ARCH targets) and the widest
 * vectors their kernels use. A table of the library's names, not of CPUs. */
static const struct {
    const char *name;
    cpu_isa_level level;
} blas_cores[] = {
    {"Prescott", CPU_ISA_SSE},       {"Core2", CPU_ISA_SSE},        {"Penryn", CPU_ISA_SSE},
    {"Dunnington", CPU_ISA_SSE},     {"Nehalem", CPU_ISA_SSE},      {"Atom", CPU_ISA_SSE},
    {"Opteron", CPU_ISA_SSE},        {"Opteron(SSE3)", CPU_ISA_SSE}, {"Barcelona", CPU_ISA_SSE},
    {"Bobcat", CPU_ISA_SSE},         {"Sandybridge", CPU_ISA_AVX},  {"Bulldozer", CPU_ISA_AVX},
    {"Piledriver", CPU_ISA_AVX},     {"Steamroller", CPU_ISA_AVX},  {"Excavator", CPU_ISA_AVX},
    {"Haswell", CPU_ISA_AVX2},       {"Zen", CPU_ISA_AVX2},         {"SkylakeX", CPU_ISA_AVX512},
    {"Cooperlake", CPU_ISA_AVX512},  {"SapphireRapids", CPU_ISA_AVX512},
};

int cpu_blas_core_level(const char *core)
{
    for (size_t i = 0; core && i < sizeof blas_cores / sizeof blas_cores[0]; i++)
        if (!strcasecmp(core, blas_cores[i].name)) return (int)blas_cores[i].level;
    return -1;
}

static const char *blas_core_names(void)
{
    static char list[512];
    if (!list[0]) {
        size_t n = 0;
        for (size_t i = 0; i < sizeof blas_cores / sizeof blas_cores[0] && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%.20s", i ? ", " : "", blas_cores[i].name);
    }
    return list;
}

const char *cpu_blas_core_for(const cpu_isa_info *cpu, cpu_isa_level level)
{
    int amd = !strcmp(cpu->vendor, "AuthenticAMD") || !strcmp(cpu->vendor, "HygonGenuine");
    switch (level) {
    case CPU_ISA_AVX512: return cpu->avx512_bf16 ? "Cooperlake" : "SkylakeX";
    case CPU_ISA_AVX2: return amd ? "Zen" : "Haswell";
    case CPU_ISA_AVX: return "Sandybridge";
    default: return "Prescott";
    }
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* The state without executing anything: for library users (tests) that never
 * called cpu_kernels_init, and the first half of it. A bad or too high
 * BERTC_CPU_ISA is ignored here; decide() refuses it. */
static void fill_passive(cpu_kernels_state *s)
{
    memset(s, 0, sizeof *s);
    const cpu_isa_state *isa = cpu_isa();
    s->cpu = isa->cpu;
    s->level = isa->level;
    copy_str(s->level_from, sizeof s->level_from, isa->level_from);
    copy_str(s->blas_core, sizeof s->blas_core, openblas_get_corename());
    const char *user = getenv("OPENBLAS_CORETYPE"), *ours = getenv(ENV_CORE);
    if (user && *user && !(ours && !strcasecmp(ours, user)))
        snprintf(s->blas_from, sizeof s->blas_from, "OPENBLAS_CORETYPE=%.40s (set by the user)", user);
    else if (user && *user)
        copy_str(s->blas_from, sizeof s->blas_from, "set by bertc");
    else
        copy_str(s->blas_from, sizeof s->blas_from, "OpenBLAS's own choice");
    const char *fb = getenv(ENV_FALLBACK);
    if (ours && user && !strcasecmp(ours, user) && fb) copy_str(s->blas_fallback, sizeof s->blas_fallback, fb);
}

const cpu_kernels_state *cpu_kernels(void)
{
    if (!g_state.ready) {
        fill_passive(&g_state);
        g_state.ready = 1;
    }
    return &g_state;
}

/* Checks what the user asked for; fills *want_core with the core bertc wants
 * (NULL: keep what OpenBLAS runs). */
static int decide(cpu_kernels_state *s, const char **want_core)
{
    *want_core = NULL;
    int rc = cpu_isa_check_cap();
    if (rc) return rc;
    const char *user = getenv("OPENBLAS_CORETYPE"), *ours = getenv(ENV_CORE);
    int user_core = user && *user && !(ours && !strcasecmp(ours, user));
    if (user_core) {
        int lvl = cpu_blas_core_level(user);
        if (lvl < 0)
            return err_set(ERR_INPUT, "OPENBLAS_CORETYPE=%.40s: not an OpenBLAS x86-64 core (%s)", user,
                           blas_core_names());
        if (lvl > (int)s->cpu.level) {
            char what[80];
            snprintf(what, sizeof what, "OPENBLAS_CORETYPE=%.40s", user);
            return cpu_isa_refuse(what, (cpu_isa_level)lvl);
        }
        if (lvl > (int)s->level)
            return err_set(ERR_INPUT, "OPENBLAS_CORETYPE=%.40s uses %s, above %s: unset one of them", user,
                           cpu_isa_name((cpu_isa_level)lvl), s->level_from);
        return 0; /* honoured as given */
    }
    int have = cpu_blas_core_level(s->blas_core);
    if (have == (int)s->level) return 0;
    *want_core = cpu_blas_core_for(&s->cpu, s->level);
    return 0;
}

/* BERTC_GEMM: 0 auto (or unset), 1 onednn, 2 openblas, -1 anything else. */
static int gemm_wanted(const char **val)
{
    const char *g = getenv("BERTC_GEMM");
    *val = g;
    if (!g || !*g || !strcasecmp(g, "auto")) return 0;
    if (!strcasecmp(g, "onednn") || !strcasecmp(g, "dnnl")) return 1;
    if (!strcasecmp(g, "openblas")) return 2;
    return -1;
}

static onednn_lib g_onednn;

int cpu_kernels_gemm_choose(void)
{
    cpu_kernels_state *s = (cpu_kernels_state *)cpu_kernels();
    const char *val;
    int want = gemm_wanted(&val);
    if (want < 0) return err_set(ERR_INPUT, "BERTC_GEMM=%.40s: not a GEMM library (auto, onednn or openblas)", val);
    if (s->gemm_ready) return 0;
    copy_str(s->gemm_from, sizeof s->gemm_from, "auto");
    if (want) snprintf(s->gemm_from, sizeof s->gemm_from, "BERTC_GEMM=%s", want == 1 ? "onednn" : "openblas");
    s->gemm_onednn = 0;
    s->onednn_missing[0] = 0;
    if (want == 0 && s->level < CPU_ISA_AVX2) {
        /* Measured the fastest at AVX2 and AVX-512 only; below, oneDNN may lack even its SSE4.1 JIT. */
        copy_str(s->onednn_missing, sizeof s->onednn_missing,
                 "level below avx2, where it was not measured; BERTC_GEMM=onednn uses it");
    } else if (want != 2) {
        char why[200];
        if (onednn_load(&g_onednn, (int)s->level, why, sizeof why) == 0) {
            s->gemm_onednn = 1;
            copy_str(s->onednn_version, sizeof s->onednn_version, g_onednn.version);
            copy_str(s->onednn_isa, sizeof s->onednn_isa, g_onednn.isa);
        } else if (want == 1) {
            return err_set(ERR_INPUT, "BERTC_GEMM=onednn: %s (Debian: apt-get install libdnnl2)", why);
        } else {
            copy_str(s->onednn_missing, sizeof s->onednn_missing, why);
        }
    }
    s->gemm_ready = 1;
    return 0;
}

int cpu_kernels_bf16(char *impl, size_t cap)
{
    const cpu_kernels_state *s = cpu_kernels();
    const char *pre = "--precision bf16 on the CPU";
    if (!s->cpu.avx512_bf16 && !(s->cpu.amx_bf16 && s->cpu.os_amx))
        return err_set(ERR_INPUT,
                       "%s needs AVX512-BF16 or AMX-BF16, which this CPU (%s family %d model %d) lacks: without them "
                       "bf16 products run no faster than fp32; use fp32",
                       pre, s->cpu.vendor, s->cpu.family, s->cpu.model);
    if (s->level < CPU_ISA_AVX512)
        return err_set(ERR_INPUT, "%s needs the avx512 level; bertc's kernels are held to %s (%s)", pre,
                       cpu_isa_name(s->level), s->level_from);
    char why[200];
    onednn_lib lib;
    if (onednn_load(&lib, (int)s->level, why, sizeof why) != 0)
        return err_set(ERR_INPUT, "%s computes with oneDNN: %s (Debian: apt-get install libdnnl2)", pre, why);
    if (onednn_bf16_init(why, sizeof why) != 0) return err_set(ERR_INPUT, "%s: %s", pre, why);
    if (impl && cap) snprintf(impl, cap, "oneDNN %s %s", lib.version, onednn_bf16_impl());
    return 0;
}

onednn_sgemm_fn cpu_kernels_onednn_sgemm(void)
{
    if (cpu_kernels_gemm_choose() != 0 || !cpu_kernels()->gemm_onednn) return NULL;
    return g_onednn.sgemm;
}

int cpu_kernels_init(int argc, char **argv)
{
    (void)argc;
    cpu_kernels_state *s = &g_state;
    fill_passive(s);
    s->ready = 1;
    const char *want_core;
    int rc = decide(s, &want_core);
    if (rc) return rc;
    const char *gval;
    int gw = gemm_wanted(&gval);
    if (gw < 0) return cpu_kernels_gemm_choose(); /* the error */
    int again = getenv(ENV_REEXEC) != NULL;
    unsetenv(ENV_REEXEC); /* children decide for themselves */
    /* oneDNN asked for by name: loaded now, so that its absence is an error before any work
     * (under auto it loads when the CPU backend first needs it). */
    if (gw == 1 && (!want_core || !strcasecmp(want_core, s->blas_core) || again) &&
        (rc = cpu_kernels_gemm_choose()) != 0)
        return rc;
    if (!want_core) return 0;
    if (!strcasecmp(want_core, s->blas_core)) return 0;
    if (again) {
        snprintf(s->warning, sizeof s->warning, "OpenBLAS did not take OPENBLAS_CORETYPE=%.31s: it runs core %.31s",
                 want_core, s->blas_core);
        return 0;
    }
    int fallback = cpu_blas_core_level(s->blas_core) < (int)s->cpu.level;
    setenv("OPENBLAS_CORETYPE", want_core, 1);
    setenv(ENV_CORE, want_core, 1);
    if (fallback) setenv(ENV_FALLBACK, s->blas_core, 1);
    else unsetenv(ENV_FALLBACK);
    setenv(ENV_REEXEC, "1", 1);
    fflush(NULL);
    if (argv && argv[0]) execv("/proc/self/exe", argv);
    /* Still here: no re-execution possible; run with what OpenBLAS chose. */
    unsetenv(ENV_REEXEC);
    snprintf(s->warning, sizeof s->warning, "could not run again with OPENBLAS_CORETYPE=%.31s; OpenBLAS runs core %.31s",
             want_core, s->blas_core);
    return 0;
}

/* "OpenBLAS 0.3.21 (core Zen)" */
static char *openblas_name(char *buf, size_t cap)
{
    const cpu_kernels_state *s = cpu_kernels();
    char ver[64] = "OpenBLAS";
    const char *cfg = openblas_get_config();
    if (cfg) {
        const char *sp = strchr(cfg, ' ');
        if (sp) sp = strchr(sp + 1, ' ');
        size_t n = sp ? (size_t)(sp - cfg) : strlen(cfg);
        if (n >= sizeof ver) n = sizeof ver - 1;
        memcpy(ver, cfg, n);
        ver[n] = 0;
    }
    snprintf(buf, cap, "%s (core %s)", ver, s->blas_core);
    return buf;
}

char *cpu_kernels_gemm(char *buf, size_t cap)
{
    (void)cpu_kernels_gemm_choose();
    const cpu_kernels_state *s = cpu_kernels();
    if (s->gemm_onednn) {
        snprintf(buf, cap, "oneDNN %s (%s)", s->onednn_version, s->onednn_isa);
        return buf;
    }
    return openblas_name(buf, cap);
}

char *cpu_kernels_describe(char *buf, size_t cap)
{
    char gemm[96], blas[96], from[192], which[400];
    cpu_kernels_gemm(gemm, sizeof gemm); /* decides the GEMM first */
    const cpu_kernels_state *s = cpu_kernels();
    openblas_name(blas, sizeof blas);
    if (s->gemm_onednn)
        snprintf(which, sizeof which, "%s sgemm, %.120s; blas %s", gemm, s->gemm_from, blas);
    else if (s->onednn_missing[0])
        snprintf(which, sizeof which, "%s (oneDNN not used: %.200s)", gemm, s->onednn_missing);
    else
        snprintf(which, sizeof which, "%s (%.120s)", gemm, s->gemm_from);
    if (s->blas_fallback[0])
        snprintf(from, sizeof from, "set by bertc: OpenBLAS's own choice for this CPU was the generic %.31s",
                 s->blas_fallback);
    else if (cpu_blas_core_level(s->blas_core) < (int)s->level)
        snprintf(from, sizeof from, "%.100s, below the %s this CPU runs: slower", s->blas_from, cpu_isa_name(s->level));
    else
        snprintf(from, sizeof from, "%.100s", s->blas_from);
    snprintf(buf, cap, "isa %s (%s; the CPU has %s), gemm %s, %s; batch-invariant gemm_fixed %s%s%s",
             cpu_isa_name(s->level), s->level_from, cpu_isa_name(s->cpu.level), which, from,
             gemm_isa_name(gemm_fixed_isa()), s->warning[0] ? "; warning: " : "", s->warning);
    return buf;
}

/* "openblas SkylakeX (BERTC_GEMM unset; core set by bertc)" */
static char *gemm_line(char *buf, size_t cap)
{
    (void)cpu_kernels_gemm_choose();
    const cpu_kernels_state *s = cpu_kernels();
    const char *from = strcmp(s->gemm_from, "auto") ? s->gemm_from : "BERTC_GEMM unset";
    if (s->gemm_onednn)
        snprintf(buf, cap, "onednn %.31s %.47s (%.39s; level %s)", s->onednn_version, s->onednn_isa, from,
                 cpu_isa_name(s->level));
    else if (s->onednn_missing[0])
        snprintf(buf, cap, "openblas %.31s (%.39s, oneDNN not used: %.200s; core: %.100s)", s->blas_core, from,
                 s->onednn_missing, s->blas_fallback[0] ? "set by bertc" : s->blas_from);
    else
        snprintf(buf, cap, "openblas %.31s (%.39s; core: %.100s)", s->blas_core, from,
                 s->blas_fallback[0] ? "set by bertc" : s->blas_from);
    return buf;
}

char *cpu_kernels_lines(char *buf, size_t cap)
{
    char v[640];
    size_t n = (size_t)snprintf(buf, cap, "kernel gemm: %.600s\n", gemm_line(v, sizeof v));
    for (int f = 0; f < CPU_K_COUNT && n < cap; f++)
        n += (size_t)snprintf(buf + n, cap - n, "kernel %s: %.600s\n", cpu_kernel_family_name((cpu_kernel_family)f),
                              cpu_kernel_describe((cpu_kernel_family)f, v, sizeof v));
    return buf;
}
