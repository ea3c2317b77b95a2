/* The low-precision linear layers' entry points (see gemm_lowp.h): the kind's
 * hooks (gemm_dot.h's struct dot_kind, in gemm_int8.c and gemm_bf16.c) on
 * gemm_dot.h's driver. */
#include "backend/cpu/gemm_lowp.h"

#include "backend/cpu/gemm_dot.h"

#include <stdatomic.h>
#include <stdlib.h>

static const struct dot_kind *const kinds[] = {[GEMM_LOWP_INT8] = &dot_kind_int8, [GEMM_LOWP_BF16] = &dot_kind_bf16};
static atomic_int force_scalar[2];

/* The kernel this kind runs now, and its name. */
static const struct dot_kern *kern_named(gemm_lowp_kind kind, const char **name)
{
    const struct dot_kind *k = kinds[kind];
    cpu_isa_level l = cpu_kernel_level(k->family);
    const struct dot_kern *kr = NULL;
    *name = "scalar";
    if (atomic_load(&force_scalar[kind])) return &k->scalar;
    if (l == CPU_ISA_AVX512 && k->fast.tile) {
        *name = k->fast_name;
        return &k->fast;
    }
    if (l == CPU_ISA_AVX2 && k->avx2_pick && (kr = k->avx2_pick(name)) != NULL) return kr;
    *name = "scalar";
    return &k->scalar;
}

static const struct dot_kern *kern_of(gemm_lowp_kind kind)
{
    const char *name;
    return kern_named(kind, &name);
}

gemm_lowp_layer *gemm_lowp_prepare(gemm_lowp_kind kind, const float *W, long ldw, const float *bias, int OC, int C)
{
    const struct dot_kind *k = kinds[kind];
    gemm_lowp_layer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->kind = kind;
    if (dot_weights_alloc(&w->d, OC, C, k->k_per_word, bias, k->with_scales) != 0) {
        free(w);
        return NULL;
    }
    if (k->fill(&w->d, W, ldw) != 0) {
        gemm_lowp_free(w);
        return NULL;
    }
    return w;
}

void gemm_lowp_free(gemm_lowp_layer *w)
{
    if (!w) return;
    dot_weights_free(&w->d);
    free(w);
}

size_t gemm_lowp_bytes(const gemm_lowp_layer *w)
{
    return sizeof *w + dot_weights_bytes(&w->d);
}

void gemm_lowp(const gemm_lowp_layer *w, int N, const float *in, long ldin, float *out, long ldout, int nthreads)
{
    const struct dot_kind *k = kinds[w->kind];
    if (dot_gemm(k, kern_of((gemm_lowp_kind)w->kind), &w->d, N, in, ldin, out, ldout, nthreads) != 0)
        k->ref(&w->d, N, in, ldin, out, ldout);
}

void gemm_lowp_n(const gemm_lowp_layer *const *w, int nw, int N, const float *in, long ldin, float *const *out,
                 long ldout, int nthreads)
{
    if (nw <= GEMM_LOWP_MAX_N) {
        const struct dot_weights *d[GEMM_LOWP_MAX_N];
        for (int i = 0; i < nw; i++) d[i] = &w[i]->d;
        const struct dot_kind *k = kinds[w[0]->kind];
        if (dot_gemm_n(k, kern_of((gemm_lowp_kind)w[0]->kind), d, nw, N, in, ldin, out, ldout, nthreads) == 0) return;
    }
    for (int i = 0; i < nw; i++) gemm_lowp(w[i], N, in, ldin, out[i], ldout, nthreads);
}

void gemm_lowp_ref(const gemm_lowp_layer *w, int N, const float *in, long ldin, float *out, long ldout)
{
    kinds[w->kind]->ref(&w->d, N, in, ldin, out, ldout);
}

void gemm_lowp_force_scalar(gemm_lowp_kind kind, int on)
{
    atomic_store(&force_scalar[kind], on != 0);
}

const char *gemm_lowp_kernel(gemm_lowp_kind kind)
{
    const char *name;
    kern_named(kind, &name);
    return name;
}

const char *gemm_lowp_name(gemm_lowp_kind kind)
{
    return kind == GEMM_LOWP_INT8 ? "int8" : "bf16";
}
