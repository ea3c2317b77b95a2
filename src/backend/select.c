/* Choosing the backend (select.h). The CUDA backend is a module
 * (cuda_module.h), loaded here only when the choice needs a GPU: every CUDA
 * call goes through its table; without it every CUDA answer is the reason
 * it is missing. */
#include "backend/select.h"

#include "backend/cpu_kernels.h"

#include "core/err.h"

#include <stdio.h>
#include <string.h>

#include "backend/cuda_module.h"

static const char *const device_names[] = {"auto", "cpu", "cuda"};

int select_parse_device(const char *s, device_kind *out)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, device_names[i])) {
            *out = (device_kind)i;
            return 0;
        }
    return err_set(ERR_INPUT, "--device: '%s' is not one of cpu, cuda, auto", s ? s : "(null)");
}

const char *select_device_name(device_kind d)
{
    return d >= DEVICE_AUTO && d <= DEVICE_CUDA ? device_names[d] : "?";
}

backend_opts backend_opts_default(void)
{
    backend_opts o = {.device = DEVICE_AUTO, .precision = PREC_AUTO};
    return o;
}

static void probe_none(char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total)
{
    if (name && name_cap) name[0] = 0;
    if (cc_major) *cc_major = 0;
    if (cc_minor) *cc_minor = 0;
    if (total) *total = 0;
}

int select_probe_cuda(int gpu, char *name, size_t name_cap, int *cc_major, int *cc_minor, int64_t *total,
                      char *why, size_t why_cap)
{
    char w[768];
    const bertc_cuda_api *api = cuda_module_get(0, w, sizeof w);
    if (!api) {
        probe_none(name, name_cap, cc_major, cc_minor, total);
        if (why && why_cap) snprintf(why, why_cap, "%s", w);
        return 0;
    }
    return api->probe(gpu, name, name_cap, cc_major, cc_minor, total, why, why_cap);
}

/* The CPU backend. Answers (a batch-invariant backend) in fp32, or in
 * bf16 or int8 where the CPU has the instructions for them (refused, with
 * the reason, where it has not: never a silent fall-back). Training in fp32
 * or bf16 (backend_cpu_set_bf16). strict (--device cpu): another precision
 * is ERR_INPUT, else (the fall-back of --device auto) fp32. */
static int make_cpu(backend *out, const backend_opts *o, backend_info *info, int strict)
{
    int answers = o->batch_invariant, rc;
    int lowp = answers && (o->precision == PREC_BF16 || o->precision == PREC_INT8);
    int bf16 = o->precision == PREC_BF16 && !answers;
    if (o->precision == PREC_INT8 && !answers)
        return err_set(ERR_INPUT, "--precision int8 is for answers (predict, ask, serve, run_squad "
                                  "--predict_precision, train --eval-precision); training computes in fp32 or bf16");
    if (strict && o->precision != PREC_AUTO && o->precision != PREC_FP32 && !bf16 && !lowp)
        return err_set(ERR_INPUT,
                       "--precision %s needs the CUDA backend; the CPU backend computes in fp32, bf16 on CPUs with "
                       "AVX512-BF16, or int8 (answers) on CPUs with AVX2",
                       select_precision_name(o->precision));
    rc = backend_cpu_create(out, o->threads);
    if (rc) return rc;
    backend_set_batch_invariant(out, o->batch_invariant);
    info->is_cuda = 0;
    info->precision = PREC_FP32;
    char impl[96] = "";
    if (lowp) {
        if ((rc = backend_set_answer_precision(out, o->precision, impl, sizeof impl))) {
            backend_free(out);
            return rc;
        }
        info->precision = o->precision;
    }
    if (bf16) {
        rc = backend_cpu_set_bf16(out, 1, impl, sizeof impl);
        if (rc && strict) {
            backend_free(out);
            return rc;
        }
        if (!rc) info->precision = PREC_BF16;
        else err_clear();
    }
    const char *gemm = o->batch_invariant                                          ? "batch-invariant GEMM"
                       : info->precision == PREC_BF16 || cpu_kernels_onednn_sgemm() ? "oneDNN"
                                                                                  : "OpenBLAS";
    char prec[160];
    if (lowp)
        snprintf(prec, sizeof prec, "%s (linear layers, %s kernel; QA head fp32)", select_precision_name(o->precision),
                 impl);
    else if (info->precision == PREC_BF16) snprintf(prec, sizeof prec, "bf16 (linear layers, %s)", impl);
    else snprintf(prec, sizeof prec, "fp32");
    if (o->threads > 0)
        snprintf(info->desc, sizeof info->desc, "cpu: %s + OpenMP, %d thread%s, %s", gemm, o->threads,
                 o->threads == 1 ? "" : "s", prec);
    else snprintf(info->desc, sizeof info->desc, "cpu: %s + OpenMP, all cores, %s", gemm, prec);
    return 0;
}

static int make_cuda(const bertc_cuda_api *api, backend *out, const backend_opts *o, backend_info *info)
{
    int rc = api->create(out, o->gpu, o->precision, o->mem_limit);
    if (rc) return rc;
    char why[256];
    int64_t total = 0;
    api->probe(o->gpu, info->gpu_name, sizeof info->gpu_name, &info->cc_major, &info->cc_minor, &total, why,
               sizeof why);
    info->is_cuda = 1;
    info->gpu_total = total;
    info->precision = api->precision(out->ctx);
    char lim[64] = "";
    if (o->mem_limit > 0)
        snprintf(lim, sizeof lim, ", limited to %.2f GiB", (double)o->mem_limit / (1024.0 * 1024 * 1024));
    snprintf(info->desc, sizeof info->desc, "cuda: GPU %d %s (compute %d.%d, %.1f GiB%s), %s", o->gpu,
             info->gpu_name, info->cc_major, info->cc_minor, (double)total / (1024.0 * 1024 * 1024), lim,
             select_precision_name(info->precision));
    return 0;
}

int backend_select(backend *out, const backend_opts *o, backend_info *info)
{
    memset(info, 0, sizeof *info);
    out->i = NULL;
    out->ctx = NULL;
    if (o->device < DEVICE_AUTO || o->device > DEVICE_CUDA)
        return err_set(ERR_INPUT, "--device: unknown device kind %d", (int)o->device);
    if (o->precision < PREC_AUTO || o->precision > PREC_INT8)
        return err_set(ERR_INPUT, "--precision: unknown precision kind %d", (int)o->precision);
    if (o->mem_limit < 0) return err_set(ERR_INPUT, "--gpu-mem-limit: negative size");
    if (o->device == DEVICE_CUDA && o->precision == PREC_INT8)
        return err_set(ERR_INPUT, "--precision int8 runs on the CPU only: use --device cpu (a GPU answers in "
                                  "fp32, tf32, fp16 or bf16)");

    if (o->device == DEVICE_CPU) return make_cpu(out, o, info, 1);

    char name[128] = "", why[768] = "";
    int major = 0, minor = 0;
    int64_t total = 0;
    /* --device cuda loads the module whatever happens; auto only where it
     * exists and a driver is present (a CPU machine never maps CUDA). */
    const bertc_cuda_api *api = cuda_module_get(o->device == DEVICE_CUDA, why, sizeof why);
    int usable = api ? api->probe(o->gpu, name, sizeof name, &major, &minor, &total, why, sizeof why) : 0;
    if (!usable) {
        if (o->device == DEVICE_CUDA) {
            if (!api)
                return err_set(ERR_RUNTIME, "--device cuda: %s%s",
                               strstr(why, "no CUDA backend") ? "" : "no CUDA backend: ", why);
            return err_set(ERR_RUNTIME, "--device cuda: no usable CUDA device: %s", why);
        }
        snprintf(info->fallback, sizeof info->fallback, "%.*s", (int)sizeof info->fallback - 1, why); /* may cut */
        int rc = make_cpu(out, o, info, 0);
        if (rc) return rc;
        if (!o->quiet) {
            if (o->precision != PREC_AUTO && o->precision != info->precision)
                log_warn("no usable CUDA device (%s): using the CPU backend in fp32, not %s", info->fallback,
                         select_precision_name(o->precision));
            else log_warn("no usable CUDA device (%s): using the CPU backend", info->fallback);
        }
        return 0;
    }
    if (o->precision == PREC_INT8)
        return err_set(ERR_INPUT, "--precision int8 runs on the CPU only: add --device cpu (GPU %d, %s, answers in "
                                  "fp32, tf32, fp16 or bf16)",
                       o->gpu, name);
    if (o->precision == PREC_BF16 && major < 8)
        return err_set(ERR_INPUT, "--precision bf16 needs compute capability 8.0 or newer; GPU %d (%s) is %d.%d: use "
                                  "fp16 (or auto)",
                       o->gpu, name, major, minor);
    return make_cuda(api, out, o, info);
}

/* The module's table when b is a CUDA backend made through it. */
static const bertc_cuda_api *cuda_of(const backend *b)
{
    if (!b || !b->i || !b->i->name || strcmp(b->i->name, "cuda")) return NULL;
    return cuda_module_loaded();
}

int backend_cuda_create(backend *out, int device, int64_t mem_limit)
{
    out->i = NULL;
    out->ctx = NULL;
    char why[768];
    const bertc_cuda_api *api = cuda_module_get(1, why, sizeof why);
    if (!api) return err_set(ERR_RUNTIME, "cuda backend: %s", why);
    return api->create(out, device, PREC_AUTO, mem_limit);
}

int backend_mem_query(backend *b, backend_mem *out)
{
    memset(out, 0, sizeof *out);
    const bertc_cuda_api *api = cuda_of(b);
    if (api) return api->mem(b->ctx, out);
    return err_set(ERR_INPUT, "backend_mem_query: the %s backend has no device memory to measure",
                   b && b->i && b->i->name ? b->i->name : "(none)");
}

void backend_mem_trim(backend *b)
{
    const bertc_cuda_api *api = cuda_of(b);
    if (api) api->trim(b->ctx);
}

void backend_mem_reset_peak(backend *b)
{
    const bertc_cuda_api *api = cuda_of(b);
    if (api) api->reset_peak(b->ctx);
}
