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

/* Where CPUID tells each feature: leaf, subleaf, register, bit. */
enum { EAX, EBX, ECX, EDX };
typedef struct {
    unsigned leaf, sub;
    int reg, bit;
    size_t field; /* offsetof(cpu_isa_info, ...) */
} feature_bit;
#define FEATURE(f, leaf, sub, reg, bit) {leaf, sub, reg, bit, offsetof(cpu_isa_info, f)}
static const feature_bit feature_bits[] = {
    FEATURE(sse3, 1, 0, ECX, 0), FEATURE(ssse3, 1, 0, ECX, 9), FEATURE(fma, 1, 0, ECX, 12),
    FEATURE(sse41, 1, 0, ECX, 19), FEATURE(sse42, 1, 0, ECX, 20), FEATURE(movbe, 1, 0, ECX, 22),
    FEATURE(avx, 1, 0, ECX, 28), FEATURE(f16c, 1, 0, ECX, 29),
    /* leaf 7: AVX2, BMI, AVX-512, AMX */
    FEATURE(bmi1, 7, 0, EBX, 3), FEATURE(avx2, 7, 0, EBX, 5), FEATURE(bmi2, 7, 0, EBX, 8), FEATURE(avx512f, 7, 0, EBX, 16),
    FEATURE(avx512dq, 7, 0, EBX, 17), FEATURE(avx512cd, 7, 0, EBX, 28), FEATURE(avx512bw, 7, 0, EBX, 30),
    FEATURE(avx512vl, 7, 0, EBX, 31), FEATURE(avx512_vnni, 7, 0, ECX, 11), FEATURE(amx_bf16, 7, 0, EDX, 22),
    FEATURE(avx512_fp16, 7, 0, EDX, 23), FEATURE(amx_tile, 7, 0, EDX, 24),
    FEATURE(avx_vnni, 7, 1, EAX, 4), FEATURE(avx512_bf16, 7, 1, EAX, 5),
    /* the extended leaf */
    FEATURE(lzcnt, 0x80000001u, 0, ECX, 5),
};

/* The registers of a leaf and subleaf the CPU has (0 otherwise): basic
 * leaves up to maxleaf, leaf 7's subleaves up to what its subleaf 0 says,
 * extended leaves as far as the CPU reports them. */
static int cpuid_regs(unsigned leaf, unsigned sub, unsigned maxleaf, unsigned r[4])
{
    if (leaf & 0x80000000u) return __get_cpuid(leaf, &r[EAX], &r[EBX], &r[ECX], &r[EDX]);
    if (leaf > maxleaf) return 0;
    if (sub > 0) {
        __get_cpuid_count(leaf, 0, &r[EAX], &r[EBX], &r[ECX], &r[EDX]);
        if (sub > r[EAX]) return 0;
    }
    __get_cpuid_count(leaf, sub, &r[EAX], &r[EBX], &r[ECX], &r[EDX]);
    return 1;
}

static void detect_features(cpu_isa_info *c, unsigned maxleaf)
{
    for (size_t i = 0; i < sizeof feature_bits / sizeof feature_bits[0]; i++) {
        const feature_bit *f = &feature_bits[i];
        unsigned r[4] = {0};
        if (cpuid_regs(f->leaf, f->sub, maxleaf, r)) *(int *)((char *)c + f->field) = (r[f->reg] >> f->bit) & 1;
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
    int osxsave = (cc >> 27) & 1;
    detect_features(c, maxleaf);
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
