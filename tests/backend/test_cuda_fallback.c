/* Choosing the backend: option parsing, --precision auto's rule, and the
 * clean fall-back to the CPU where there is no usable GPU (no driver, no
 * device, or a build without CUDA): --device auto gives the CPU backend and
 * one notice line, --device cuda an error, never a crash. On a machine with
 * a GPU the same test checks that auto picks it and that the CUDA backend
 * reports its memory. */
#include "testutil.h"

#include "backend/backend.h"
#include "backend/select.h"
#include "backend/cpu_kernels.h"
#include "backend/cpu/gemm_lowp.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check_parsing(void)
{
    device_kind d;
    precision_kind p;
    const char *devs[] = {"auto", "cpu", "cuda"};
    for (int i = 0; i < 3; i++) {
        CHECK(select_parse_device(devs[i], &d) == 0 && (int)d == i, "%s", devs[i]);
        CHECK(!strcmp(select_device_name(d), devs[i]), "name of %s", devs[i]);
    }
    const char *precs[] = {"auto", "fp32", "tf32", "fp16", "bf16", "int8"};
    for (int i = 0; i < 6; i++) {
        CHECK(select_parse_precision(precs[i], &p) == 0 && (int)p == i, "%s", precs[i]);
        CHECK(!strcmp(select_precision_name(p), precs[i]), "name of %s", precs[i]);
    }
    CHECK(select_parse_device("gpu", &d) == ERR_INPUT, "gpu");
    CHECK(strstr(err_msg(), "--device: 'gpu' is not one of cpu, cuda, auto") != NULL, "message: %s", err_msg());
    CHECK(select_parse_device("", &d) == ERR_INPUT && select_parse_device(NULL, &d) == ERR_INPUT, "empty");
    CHECK(select_parse_precision("fp8", &p) == ERR_INPUT, "fp8");
    CHECK(strstr(err_msg(), "--precision: 'fp8' is not one of auto, fp32, tf32, fp16, bf16, int8") != NULL, "message: %s",
          err_msg());
    CHECK(select_parse_precision("BF16", &p) == ERR_INPUT, "case matters");
    CHECK(select_auto_precision(7, 5) == PREC_FP16, "T4: fp16");
    CHECK(select_auto_precision(8, 0) == PREC_BF16 && select_auto_precision(8, 6) == PREC_BF16, "Ampere: bf16");
    CHECK(select_auto_precision(9, 0) == PREC_BF16 && select_auto_precision(12, 0) == PREC_BF16, "Hopper on: bf16");
    CHECK(precision_needs_loss_scaling(PREC_FP16) && !precision_needs_loss_scaling(PREC_BF16) &&
              !precision_needs_loss_scaling(PREC_FP32) && !precision_needs_loss_scaling(PREC_TF32),
          "only fp16 scales the loss");
    err_clear();
}

/* Runs backend_select with stderr captured into buf. */
static int select_capturing(backend *be, const backend_opts *o, backend_info *info, char *buf, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/stderr.txt", tu_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w+");
    if (!f || saved < 0) return -100;
    dup2(fileno(f), 2);
    int rc = backend_select(be, o, info);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return rc;
}

static void check_cpu(void)
{
    backend be;
    backend_info info;
    backend_opts o = backend_opts_default();
    o.device = DEVICE_CPU;
    o.threads = 1;
    CHECK(backend_select(&be, &o, &info) == 0, "%s", err_msg());
    CHECK(be.i && !strcmp(be.i->name, "cpu") && !info.is_cuda && info.precision == PREC_FP32, "cpu, fp32");
    printf("--device cpu: %s\n", info.desc);
    backend_mem m;
    CHECK(backend_mem_query(&be, &m) == ERR_INPUT, "no device memory on the CPU");
    backend_mem_reset_peak(&be);
    backend_mem_trim(&be); /* no-ops on the CPU */
    backend_free(&be);
    /* bf16 on the CPU: where AVX512-BF16 and oneDNN are (cpu_kernels_bf16), else one clear error. */
    int cpu_bf16 = cpu_kernels_bf16(NULL, 0) == 0;
    err_clear();
    o.precision = PREC_BF16;
    int rc = backend_select(&be, &o, &info);
    printf("--device cpu --precision bf16 (this CPU %s): %d: %s\n", cpu_bf16 ? "has it" : "has not", rc,
           rc ? err_msg() : info.desc);
    if (cpu_bf16) {
        CHECK(rc == 0 && info.precision == PREC_BF16 && strstr(info.desc, "bf16 (linear layers, oneDNN "), "bf16 on the CPU");
        backend_free(&be);
    } else {
        CHECK(rc == ERR_INPUT && strstr(err_msg(), "--precision bf16 on the CPU "), "bf16 refused on this CPU");
        CHECK(be.i == NULL && be.ctx == NULL, "nothing created on failure");
    }
    /* answers (batch-invariant) in bf16 and int8 where the CPU has the
     * instructions (bf16: AVX512-BF16; int8: AVX2 or above), else refused
     * naming them; the description names the kernel that runs */
    o.batch_invariant = 1;
    for (precision_kind lp = PREC_BF16; lp <= PREC_INT8; lp++) {
        char why[256];
        int fast = cpu_kernel_fast(lp == PREC_INT8 ? CPU_K_GEMM_INT8 : CPU_K_GEMM_BF16, why, sizeof why);
        o.precision = lp;
        rc = backend_select(&be, &o, &info);
        printf("--device cpu --precision %s, answers (this CPU: %s): %d: %s\n", select_precision_name(lp),
               fast ? "fast kernel" : why, rc, rc ? err_msg() : info.desc);
        if (fast) {
            char kern[64];
            snprintf(kern, sizeof kern, "(linear layers, %s kernel",
                     gemm_lowp_kernel(lp == PREC_INT8 ? GEMM_LOWP_INT8 : GEMM_LOWP_BF16));
            CHECK(rc == 0 && info.precision == lp && strstr(info.desc, kern), "%s answers: '%s' not in '%s'",
                  select_precision_name(lp), kern, rc ? "" : info.desc);
            backend_free(&be);
        } else {
            CHECK(rc == ERR_INPUT && strstr(err_msg(), why), "%s answers refused naming why",
                  select_precision_name(lp));
            CHECK(be.i == NULL && be.ctx == NULL, "nothing created on failure");
        }
    }
    o.batch_invariant = 0;
    o.precision = PREC_INT8;
    rc = backend_select(&be, &o, &info);
    printf("--device cpu --precision int8, training: %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "--precision int8 is for answers"), "int8 training refused");
    o.device = DEVICE_CUDA;
    rc = backend_select(&be, &o, &info);
    printf("--device cuda --precision int8: %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "--precision int8 runs on the CPU only"), "int8 on CUDA refused");
    o.device = DEVICE_CPU;
    o.precision = PREC_FP16;
    rc = backend_select(&be, &o, &info);
    printf("--device cpu --precision fp16: %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_INPUT && strstr(err_msg(), "--precision fp16 needs the CUDA backend"), "fp16 on the CPU");
    CHECK(be.i == NULL && be.ctx == NULL, "nothing created on failure");
    o.precision = PREC_FP32;
    o.device = (device_kind)7;
    CHECK(backend_select(&be, &o, &info) == ERR_INPUT, "device 7");
    o.device = DEVICE_CPU;
    o.mem_limit = -1;
    CHECK(backend_select(&be, &o, &info) == ERR_INPUT, "negative limit");
    err_clear();
}

static void check_no_gpu(const char *why)
{
    backend be;
    backend_info info;
    backend_opts o = backend_opts_default();
    o.threads = 1;
    char out[2048];
    int rc = select_capturing(&be, &o, &info, out, sizeof out);
    printf("--device auto without a GPU: rc %d, backend %s, stderr: %s", rc, be.i ? be.i->name : "(none)", out);
    CHECK(rc == 0 && be.i && !strcmp(be.i->name, "cpu") && info.precision == PREC_FP32, "falls back to the CPU");
    CHECK(tu_count_lines(out) == 1 && !strncmp(out, "bertc: warning: no usable CUDA device (", 39) &&
              strstr(out, "): using the CPU backend\n"),
          "one notice line");
    CHECK(strstr(out, why) != NULL && !strcmp(info.fallback, why), "the notice gives the probe's reason");
    backend_free(&be);

    /* An explicit GPU precision: still the CPU, and the notice says fp32;
     * bf16 stays bf16 where this CPU trains in it. */
    o.precision = PREC_FP16;
    rc = select_capturing(&be, &o, &info, out, sizeof out);
    printf("--device auto --precision fp16 without a GPU: rc %d, stderr: %s", rc, out);
    CHECK(rc == 0 && be.i && info.precision == PREC_FP32, "CPU in fp32");
    CHECK(tu_count_lines(out) == 1 && strstr(out, "using the CPU backend in fp32, not fp16"),
          "notice names the change");
    backend_free(&be);
    int cpu_bf16 = cpu_kernels_bf16(NULL, 0) == 0;
    err_clear();
    o.precision = PREC_BF16;
    rc = select_capturing(&be, &o, &info, out, sizeof out);
    printf("--device auto --precision bf16 without a GPU (CPU bf16: %s): rc %d, stderr: %s", cpu_bf16 ? "yes" : "no",
           rc, out);
    CHECK(rc == 0 && be.i && info.precision == (cpu_bf16 ? PREC_BF16 : PREC_FP32), "CPU in bf16 where it can");
    CHECK(tu_count_lines(out) == 1 && (cpu_bf16 ? strstr(out, "): using the CPU backend\n") != NULL
                                                : strstr(out, "using the CPU backend in fp32, not bf16") != NULL),
          "notice says what changed");
    backend_free(&be);

    /* quiet: no notice. */
    o.quiet = 1;
    rc = select_capturing(&be, &o, &info, out, sizeof out);
    CHECK(rc == 0 && out[0] == 0, "quiet: stderr '%s'", out);
    backend_free(&be);

    /* --device cuda: an error, not a fall-back. */
    o = backend_opts_default();
    o.device = DEVICE_CUDA;
    rc = select_capturing(&be, &o, &info, out, sizeof out);
    printf("--device cuda without a GPU: rc %d: %s\n", rc, err_msg());
#ifdef BERTC_HAVE_CUDA
    CHECK(rc == ERR_RUNTIME, "no device is a run-time failure");
    CHECK(strstr(err_msg(), "--device cuda: no usable CUDA device: ") != NULL, "message");
    /* backend.h's direct entry point fails cleanly too. */
    rc = backend_cuda_create(&be, 0, 0);
    printf("backend_cuda_create without a GPU: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && be.i == NULL, "backend_cuda_create fails cleanly");
#else
    /* The CUDA backend is a module now: one missing is an installation
     * matter (exit 1), as a missing libbertc_cuda.so is in a CUDA build. */
    CHECK(rc == ERR_RUNTIME, "a build without CUDA: no module, a run-time failure");
    CHECK(strstr(err_msg(), "this build has no CUDA backend") != NULL, "message");
#endif
    CHECK(out[0] == 0, "no notice on an error: '%s'", out);
    err_clear();
}

static void check_gpu(const char *name, int major, int minor, long long total)
{
    backend be;
    backend_info info;
    backend_opts o = backend_opts_default();
    char out[2048];
    int rc = select_capturing(&be, &o, &info, out, sizeof out);
    printf("--device auto with %s (%d.%d, %lld B): rc %d: %s\n", name, major, minor, total, rc, info.desc);
    CHECK(rc == 0 && be.i && !strcmp(be.i->name, "cuda") && info.is_cuda, "auto picks the GPU: %s", err_msg());
    CHECK(out[0] == 0, "no notice: '%s'", out);
    CHECK(info.precision == select_auto_precision(major, minor), "auto precision");
    backend_mem m;
    CHECK(backend_mem_query(&be, &m) == 0, "%s", err_msg());
    printf("memory: used %lld, peak %lld, free %lld, device free %lld of %lld\n", (long long)m.used, (long long)m.peak,
           (long long)m.free, (long long)m.device_free, (long long)m.device_total);
    CHECK(m.used > 0 && m.peak >= m.used && m.device_total > 0 && m.device_total <= total && m.free > 0, "figures");
    void *p = be.i->alloc(be.ctx, 1 << 20);
    backend_mem m2;
    backend_mem_query(&be, &m2);
    CHECK(p && m2.used == m.used + (1 << 20), "an allocation is counted");
    /* A low-precision matmul grows the workspace; trim gives it back. */
    float *x = be.i->alloc(be.ctx, 64 * 64 * 4), *w = be.i->alloc(be.ctx, 64 * 64 * 4);
    be.i->zero(be.ctx, x, 64 * 64 * 4);
    be.i->zero(be.ctx, w, 64 * 64 * 4);
    be.i->matmul_forward(be.ctx, p, x, w, NULL, 64, 64, 64);
    CHECK(be.i->sync(be.ctx) == 0, "matmul: %s", err_msg());
    backend_mem grown, trimmed;
    backend_mem_query(&be, &grown);
    backend_mem_trim(&be);
    backend_mem_query(&be, &trimmed);
    printf("workspace: used %lld after a matmul, %lld after trim\n", (long long)grown.used, (long long)trimmed.used);
    CHECK(trimmed.used < grown.used && trimmed.used == m2.used + 2 * 64 * 64 * 4, "trim frees the workspace");
    be.i->release(be.ctx, x);
    be.i->release(be.ctx, w);
    be.i->release(be.ctx, p);
    backend_free(&be);
    /* A limit below what creation needs is an out-of-memory error. */
    o.device = DEVICE_CUDA;
    o.mem_limit = 1 << 20;
    rc = backend_select(&be, &o, &info);
    printf("--gpu-mem-limit 1MiB: rc %d: %s\n", rc, err_msg());
    CHECK(rc == ERR_RUNTIME && strstr(err_msg(), "out of memory"), "tiny limit");
    if (!rc) backend_free(&be);
    if (major < 8) {
        o.mem_limit = 0;
        o.precision = PREC_BF16;
        CHECK(backend_select(&be, &o, &info) == ERR_INPUT, "bf16 below 8.0");
    }
    err_clear();
}

int main(void)
{
    check_parsing();
    check_cpu();
    char name[128], why[256];
    int major, minor;
    int64_t total;
    int have = select_probe_cuda(0, name, sizeof name, &major, &minor, &total, why, sizeof why);
    printf("probe: %s\n", have ? name : why);
    CHECK(have || why[0], "no GPU comes with a reason");
#ifndef BERTC_HAVE_CUDA
    CHECK(!have && strstr(why, "no CUDA backend"), "a build without CUDA finds none");
#endif
    if (have) check_gpu(name, major, minor, (long long)total);
    else check_no_gpu(why);
    /* A GPU that does not exist is a reason, not a crash. */
    CHECK(select_probe_cuda(4096, name, sizeof name, &major, &minor, &total, why, sizeof why) == 0 && why[0],
          "GPU 4096");
    return tu_done();
}
