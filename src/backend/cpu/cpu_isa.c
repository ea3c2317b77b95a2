/* The CPU's features, the cap and each kernel family's variant (cpu_isa.h). */
#include "backend/cpu/cpu_isa.h"

#include "core/err.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* Leaf 7 (AVX2, AVX-512, AMX) and the extended leaf's LZCNT. */
static void detect_leaf7(cpu_isa_info *c)
{
    unsigned a = 0, b = 0, cc = 0, d = 0;
    __get_cpuid_count(7, 0, &a, &b, &cc, &d);
    c->bmi1 = (b >> 3) & 1;
    c->avx2 = (b >> 5) & 1;
    c->bmi2 = (b >> 8) & 1;
    c->avx512f = (b >> 16) & 1;
    c->avx512dq = (b >> 17) & 1;
    c->avx512cd = (b >> 28) & 1;
    c->avx512bw = (b >> 30) & 1;
    c->avx512vl = (b >> 31) & 1;
    c->avx512_vnni = (cc >> 11) & 1;
    c->amx_bf16 = (d >> 22) & 1;
    c->avx512_fp16 = (d >> 23) & 1;
    c->amx_tile = (d >> 24) & 1;
    unsigned sub = a;
    if (sub >= 1) {
        __get_cpuid_count(7, 1, &a, &b, &cc, &d);
        c->avx_vnni = (a >> 4) & 1;
        c->avx512_bf16 = (a >> 5) & 1;
    }
}
#endif

void cpu_isa_detect(cpu_isa_info *c)
{
    memset(c, 0, sizeof *c);
    c->level = CPU_ISA_SSE;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, cc, d, maxleaf;
    if (!__get_cpuid(0, &maxleaf, &b, &cc, &d)) return;
    memcpy(c->vendor, &b, 4);
    memcpy(c->vendor + 4, &d, 4);
    memcpy(c->vendor + 8, &cc, 4);
    c->vendor[12] = 0;
    if (!__get_cpuid(1, &a, &b, &cc, &d)) return;
    int base_family = (int)((a >> 8) & 0xf), base_model = (int)((a >> 4) & 0xf);
    c->family = base_family == 0xf ? base_family + (int)((a >> 20) & 0xff) : base_family;
    c->model = (base_family == 6 || base_family == 0xf) ? base_model | (int)(((a >> 16) & 0xf) << 4) : base_model;
    c->sse3 = cc & 1;
    c->ssse3 = (cc >> 9) & 1;
    c->fma = (cc >> 12) & 1;
    c->sse41 = (cc >> 19) & 1;
    c->sse42 = (cc >> 20) & 1;
    c->movbe = (cc >> 22) & 1;
    int osxsave = (cc >> 27) & 1;
    c->avx = (cc >> 28) & 1;
    c->f16c = (cc >> 29) & 1;
    if (maxleaf >= 7) detect_leaf7(c);
    if (__get_cpuid(0x80000001, &a, &b, &cc, &d)) c->lzcnt = (cc >> 5) & 1;
    if (osxsave) {
        unsigned long long x = xcr0();
        c->os_ymm = (x & 0x6) == 0x6;
        c->os_zmm = c->os_ymm && (x & 0xe0) == 0xe0;
        c->os_amx = (x & 0x60000) == 0x60000;
    }
    if (c->avx && c->os_ymm) c->level = CPU_ISA_AVX;
    if (c->level == CPU_ISA_AVX && c->avx2 && c->fma) c->level = CPU_ISA_AVX2;
    if (c->level == CPU_ISA_AVX2 && c->os_zmm && c->avx512f && c->avx512dq && c->avx512cd && c->avx512bw &&
        c->avx512vl)
        c->level = CPU_ISA_AVX512;
#endif
}

static const char *const level_names[] = {"sse", "avx", "avx2", "avx512"};

const char *cpu_isa_name(cpu_isa_level level)
{
    return level >= CPU_ISA_SSE && level <= CPU_ISA_AVX512 ? level_names[level] : "?";
}

int cpu_isa_parse(const char *s, cpu_isa_level *out)
{
    for (int i = 0; i <= CPU_ISA_AVX512; i++)
        if (s && !strcasecmp(s, level_names[i])) {
            *out = (cpu_isa_level)i;
            return 0;
        }
    if (s && (!strcasecmp(s, "avx-512") || !strcasecmp(s, "avx512f"))) {
        *out = CPU_ISA_AVX512;
        return 0;
    }
    return -1;
}

const char *cpu_isa_needs(cpu_isa_level level)
{
    switch (level) {
    case CPU_ISA_AVX512: return "AVX-512 (F, DQ, CD, BW, VL) with the OS saving the ZMM state";
    case CPU_ISA_AVX2: return "AVX2 and FMA with the OS saving the YMM state";
    case CPU_ISA_AVX: return "AVX with the OS saving the YMM state";
    default: return "SSE3";
    }
}

/* BERTC_CPU_ISA: 0 when unset or auto, 1 with *cap the level asked for, -1
 * when it names no level (*raw: the value). */
static int env_isa_cap(cpu_isa_level *cap, const char **raw)
{
    const char *want = getenv("BERTC_CPU_ISA");
    *raw = want;
    if (!want || !*want || !strcasecmp(want, "auto")) return 0;
    return cpu_isa_parse(want, cap) == 0 ? 1 : -1;
}

static int has_vnni(const cpu_isa_info *c)
{
    return c->avx512_vnni;
}

static int has_avx512bf16(const cpu_isa_info *c)
{
    return c->avx512_bf16;
}

/* Each family's code: the levels it has, its name for the sse level,
 * where its avx512 code needs more than the level (an instruction set
 * beside AVX-512 F/DQ/CD/BW/VL): the test, that set's name and the code's,
 * and the lowest level cpu_kernel_fast counts as fast (0: its highest). */
static const struct {
    const char *name;
    unsigned levels; /* bit per cpu_isa_level */
    const char *sse_name;
    int (*avx512_has)(const cpu_isa_info *);
    const char *avx512_needs, *avx512_name;
    cpu_isa_level fast_from;
} families[CPU_K_COUNT] = {
    [CPU_K_GEMM_FIXED] = {"gemm_fixed", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2 | 1u << CPU_ISA_AVX512, "scalar"},
    [CPU_K_GELU] = {"gelu", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2 | 1u << CPU_ISA_AVX512, "sse"},
    [CPU_K_SOFTMAX] = {"softmax", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2 | 1u << CPU_ISA_AVX512, "sse"},
    [CPU_K_LAYERNORM] = {"layernorm", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2, "sse"},
    [CPU_K_DROPOUT] = {"dropout", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2, "sse"},
    [CPU_K_ADAM] = {"adam", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2, "sse"},
    [CPU_K_ELEMENTWISE] = {"elementwise", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2, "sse"},
    [CPU_K_GEMM_INT8] = {"gemm_int8", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX2 | 1u << CPU_ISA_AVX512, "scalar",
                         has_vnni, "AVX512-VNNI", "avx512vnni", CPU_ISA_AVX2},
    [CPU_K_GEMM_BF16] = {"gemm_bf16", 1u << CPU_ISA_SSE | 1u << CPU_ISA_AVX512, "scalar", has_avx512bf16,
                         "AVX512-BF16", "avx512bf16"},
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_isa_state g_state;
static cpu_isa_level g_family_level[CPU_K_COUNT];

/* The avx2 code of the elementwise families is compiled for x86-64-v3
 * (cpu_math.h), which adds BMI1/2, LZCNT, MOVBE and F16C to AVX2 and FMA;
 * gemm_fixed's kernels need only AVX2 and FMA. */
static int has_v3(const cpu_isa_info *c)
{
    return c->bmi1 && c->bmi2 && c->lzcnt && c->movbe && c->f16c;
}

/* 1 when the CPU has what family f's code of level l needs beyond the level. */
static int family_cpu_ok(cpu_kernel_family f, int l, const cpu_isa_info *c)
{
    if (f != CPU_K_GEMM_FIXED && l == CPU_ISA_AVX2 && !has_v3(c)) return 0;
    if (l == CPU_ISA_AVX512 && families[f].avx512_has && !families[f].avx512_has(c)) return 0;
    return 1;
}

static cpu_isa_level family_level(cpu_kernel_family f, const cpu_isa_state *s)
{
    for (int l = (int)s->level; l > CPU_ISA_SSE; l--)
        if (families[f].levels >> l & 1 && family_cpu_ok(f, l, &s->cpu)) return (cpu_isa_level)l;
    return CPU_ISA_SSE;
}

static void decide_once(void)
{
    cpu_isa_state *s = &g_state;
    cpu_isa_detect(&s->cpu);
    s->level = s->cpu.level;
    snprintf(s->level_from, sizeof s->level_from, "auto");
    cpu_isa_level cap;
    const char *want;
    if (env_isa_cap(&cap, &want) == 1 && cap <= s->cpu.level) {
        s->level = cap;
        snprintf(s->level_from, sizeof s->level_from, "BERTC_CPU_ISA=%s", cpu_isa_name(cap));
    }
    for (int f = 0; f < CPU_K_COUNT; f++) g_family_level[f] = family_level((cpu_kernel_family)f, s);
}

const cpu_isa_state *cpu_isa(void)
{
    pthread_once(&g_once, decide_once);
    return &g_state;
}

int cpu_isa_refuse(const char *what, cpu_isa_level asked)
{
    const cpu_isa_state *s = cpu_isa();
    return err_set(ERR_INPUT, "%s: this CPU (%s family %d model %d) cannot run it: %s needs %s; the highest level here is %s",
                   what, s->cpu.vendor, s->cpu.family, s->cpu.model, cpu_isa_name(asked), cpu_isa_needs(asked),
                   cpu_isa_name(s->cpu.level));
}

int cpu_isa_check_cap(void)
{
    const cpu_isa_state *s = cpu_isa();
    cpu_isa_level cap;
    const char *want;
    int asked = env_isa_cap(&cap, &want);
    if (asked < 0) return err_set(ERR_INPUT, "BERTC_CPU_ISA=%.40s: not a level (auto, avx512, avx2, avx or sse)", want);
    if (asked && cap > s->cpu.level) {
        char what[64];
        snprintf(what, sizeof what, "BERTC_CPU_ISA=%s", cpu_isa_name(cap));
        return cpu_isa_refuse(what, cap);
    }
    return 0;
}

cpu_isa_level cpu_kernel_level(cpu_kernel_family f)
{
    pthread_once(&g_once, decide_once);
    return g_family_level[f];
}

const char *cpu_kernel_family_name(cpu_kernel_family f)
{
    return f >= 0 && f < CPU_K_COUNT ? families[f].name : "?";
}

/* The name of family f's code of level l (gemm_int8's avx2 level runs
 * AVX-VNNI's kernel where the CPU has it: gemm_int8.c, avx2_pick). */
static const char *variant_name(cpu_kernel_family f, cpu_isa_level l)
{
    if (l == CPU_ISA_SSE) return families[f].sse_name;
    if (l == CPU_ISA_AVX512 && families[f].avx512_name) return families[f].avx512_name;
    if (l == CPU_ISA_AVX2 && f == CPU_K_GEMM_INT8 && cpu_isa()->cpu.avx_vnni) return "avxvnni";
    return cpu_isa_name(l);
}

char *cpu_kernel_describe(cpu_kernel_family f, char *buf, size_t cap)
{
    const cpu_isa_state *s = cpu_isa();
    cpu_isa_level l = cpu_kernel_level(f);
    char lvl[128], note[128] = "";
    if (!strcmp(s->level_from, "auto"))
        snprintf(lvl, sizeof lvl, "level %s: the CPU's, no cap", cpu_isa_name(s->level));
    else
        snprintf(lvl, sizeof lvl, "level %s: %s, the CPU has %s", cpu_isa_name(s->level), s->level_from,
                 cpu_isa_name(s->cpu.level));
    if (l < s->level && !(families[f].levels >> s->level & 1))
        snprintf(note, sizeof note, "; %s has no %s code", families[f].name, cpu_isa_name(s->level));
    if (l < CPU_ISA_AVX2 && s->level >= CPU_ISA_AVX2 && f != CPU_K_GEMM_FIXED && !has_v3(&s->cpu))
        snprintf(note, sizeof note,
                 "; its avx2 code needs x86-64-v3 (BMI1, BMI2, LZCNT, MOVBE, F16C), the CPU lacks one");
    if (l < CPU_ISA_AVX512 && s->level == CPU_ISA_AVX512 && !family_cpu_ok(f, CPU_ISA_AVX512, &s->cpu))
        snprintf(note, sizeof note, "; the CPU lacks %s", families[f].avx512_needs);
    snprintf(buf, cap, "%s (%s%s)", variant_name(f, l), lvl, note);
    return buf;
}

int cpu_kernel_fast(cpu_kernel_family f, char *why, size_t cap)
{
    const cpu_isa_state *s = cpu_isa();
    int top = CPU_ISA_AVX512;
    while (top > CPU_ISA_SSE && !(families[f].levels >> top & 1)) top--;
    if (families[f].fast_from) top = families[f].fast_from;
    if ((int)cpu_kernel_level(f) >= top) return 1;
    if (!why) return 0;
    char lacks[160] = "";
    const char *extra = top == CPU_ISA_AVX512 ? families[f].avx512_needs : NULL;
    if ((int)s->cpu.level < top)
        snprintf(lacks, sizeof lacks, "%s%s%s", cpu_isa_needs((cpu_isa_level)top), extra ? " and " : "",
                 extra ? extra : "");
    else if (!family_cpu_ok(f, top, &s->cpu))
        snprintf(lacks, sizeof lacks, "%s", extra ? extra : "x86-64-v3 (BMI1, BMI2, LZCNT, MOVBE, F16C)");
    if (lacks[0])
        snprintf(why, cap, "this CPU (%s family %d model %d) lacks %s", s->cpu.vendor, s->cpu.family, s->cpu.model,
                 lacks);
    else
        snprintf(why, cap, "%s holds bertc below %s", s->level_from, cpu_isa_name((cpu_isa_level)top));
    return 0;
}
