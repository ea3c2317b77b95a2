/* `bertc devices` and the hardware line (see devices.h). */
#include "obs/devices.h"
#include "backend/cpu_kernels.h"
#include "backend/cuda_module.h"
#include "obs/nvml_dl.h"
#include "obs/sysinfo.h"
#include "core/err.h"
#include "model/config.h"
#include "model/memory.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

static const double GIB = 1073741824.0;

const char *devices_auto_precision(int cc_major, int cc_minor)
{
    (void)cc_minor;
    return cc_major >= 8 ? "bf16" : cc_major == 7 ? "fp16" : "fp32";
}

/* The kernels are built for sm_75 and newer (plus PTX of the newest). */
static int cc_supported(int major, int minor) { return major > 7 || (major == 7 && minor >= 5); }

static void print_gpu(FILE *f, nvml_lib *nv, int i)
{
    nvml_device_info info;
    nvml_sample s;
    if (nvml_device_info_get(nv, i, &info) != 0) {
        fprintf(f, "GPU %d: cannot be queried (%s)\n", i, err_msg());
        err_clear();
        return;
    }
    fprintf(f, "GPU %d: %s\n", i, info.name[0] ? info.name : "(name unknown)");
    if (info.mem_total > 0) fprintf(f, "  memory:             %.1f GiB\n", info.mem_total / GIB);
    else fprintf(f, "  memory:             unknown\n");
    if (info.cc_major >= 0) {
        int tc = info.cc_major >= 7, bf16 = info.cc_major >= 8;
        fprintf(f, "  compute capability: %d.%d (Tensor Cores: %s, bf16: %s)\n", info.cc_major, info.cc_minor,
                tc ? "yes" : "no", bf16 ? "yes" : "no");
        fprintf(f, "  precision (auto):   %s%s\n", devices_auto_precision(info.cc_major, info.cc_minor),
                info.cc_major == 7 ? " (no bf16 before compute capability 8.0; fp16 with loss scaling)" : "");
        if (!cc_supported(info.cc_major, info.cc_minor))
            fprintf(f, "  note:               bertc's CUDA kernels need compute capability 7.5 or newer\n");
    } else {
        fprintf(f, "  compute capability: unknown\n");
    }
    if (nvml_device_sample(nv, i, &s) == 0) {
        char now[512] = "", part[128];
        size_t n = 0;
#define PART(...)                                                                          \
    do {                                                                                   \
        snprintf(part, sizeof part, __VA_ARGS__);                                          \
        int w_ = snprintf(now + n, sizeof now - n, "%s%s", n ? ", " : "", part);           \
        if (w_ > 0 && (size_t)w_ < sizeof now - n) n += (size_t)w_;                        \
    } while (0)
        if (isfinite(s.util_pct)) PART("%.0f%% busy", s.util_pct);
        if (isfinite(s.mem_used) && isfinite(s.mem_total)) PART("%.1f/%.1f GiB used", s.mem_used / GIB, s.mem_total / GIB);
        if (isfinite(s.temp_c)) PART("%.0f\xc2\xb0" "C", s.temp_c);
        if (isfinite(s.power_w) && isfinite(s.power_limit_w)) PART("%.0f/%.0f W", s.power_w, s.power_limit_w);
        else if (isfinite(s.power_w)) PART("%.0f W", s.power_w);
        if (isfinite(s.sm_clock_mhz)) PART("SM %.0f MHz", s.sm_clock_mhz);
        if (s.throttle_ok) {
            char thr[96];
            PART("throttle: %s", nvml_throttle_names(s.throttle, thr, sizeof thr));
        }
#undef PART
        fprintf(f, "  now:                %s\n", n ? now : "no readings");
        if (s.nerr) fprintf(f, "  NVML errors:        %d queries failed (first: %s)\n", s.nerr, s.err);
    } else {
        fprintf(f, "  now:                cannot be read (%s)\n", err_msg());
        err_clear();
    }
    if (info.err[0]) fprintf(f, "  NVML error:         %s\n", info.err);
}

/* The memory planner's prediction (model/memory.c: what bertc allocates,
 * not a measurement) for BERT-base at sequence length 384 on a card of
 * mem_total bytes; without a GPU, for a 16 GiB card such as a T4. */
static void print_planner(FILE *f, double mem_total, int cc_major)
{
    bert_config cfg;
    if (config_named("base", 30522, &cfg) != 0) {
        err_clear();
        return;
    }
    int have_gpu = isfinite(mem_total) && mem_total > 0;
    int64_t mem = have_gpu ? (int64_t)mem_total : (int64_t)16 << 30;
    precision_kind prec = (have_gpu && cc_major >= 8) ? PREC_BF16 : PREC_FP16;
    memory_query q = {.cfg = &cfg, .T = 384, .prec = prec};
    int mb = (int)memory_largest(&q, MEMORY_FIT_MICRO, memory_budget_for_card(mem), 512);
    char gib[32];
    memory_fmt_bytes(gib, sizeof gib, mem);
    fprintf(f, "planner: BERT-base at sequence length 384, %s, on %s%s: largest micro-batch %d (predicted; "
               "bertc plan --config base --seq 384 shows the breakdown)\n",
            prec == PREC_BF16 ? "bf16" : "fp16", gib, have_gpu ? "" : " (a 16 GiB card such as a T4; no GPU here)",
            mb);
}

static void print_cpu(FILE *f, const cpu_info *c)
{
    char flags[160];
    fprintf(f, "CPU: %s\n", c->model[0] ? c->model : "(model unknown)");
    fprintf(f, "  cores:              %d logical online, %d usable by bertc", c->online, c->usable);
    if (c->physical > 0) fprintf(f, ", %d physical", c->physical);
    fprintf(f, "\n  vector units:       %s\n", cpu_flags_string(c, flags, sizeof flags));
    fprintf(f, "  AVX-512: %s, AVX512-BF16: %s, AMX-BF16: %s\n", c->avx512f ? "yes" : "no",
            c->avx512_bf16 ? "yes" : "no", c->amx_bf16 ? "yes" : "no");
    if (isfinite(c->mem_total))
        fprintf(f, "  memory:             %.1f GiB%s, %.1f GiB available\n", c->mem_total / GIB,
                c->mem_cgroup ? " (container limit)" : "", isfinite(c->mem_avail) ? c->mem_avail / GIB : NAN);
    else fprintf(f, "  memory:             unknown\n");
}

void devices_print(FILE *f)
{
    nvml_lib *nv = NULL;
    int count = 0;
    char why[512] = "";
    if (nvml_open(&nv) != 0) {
        snprintf(why, sizeof why, "%s", err_msg());
        err_clear();
    } else if (nvml_device_count(nv, &count) != 0) {
        snprintf(why, sizeof why, "%s", err_msg());
        err_clear();
    }
    int first_ok_cc = -1, first_minor = 0;
    double first_mem = NAN;
    char first_name[128] = "";
    if (count == 0) {
        fprintf(f, "GPU: none found (%s)\n", why[0] ? why : "NVML reports no GPU");
    } else {
        char driver[96];
        int cuda = 0;
        nvml_driver_versions(nv, driver, sizeof driver, &cuda);
        fprintf(f, "NVIDIA driver %s, CUDA %d.%d supported by the driver; %d GPU(s)\n", driver[0] ? driver : "unknown",
                cuda / 1000, (cuda % 1000) / 10, count);
        for (int i = 0; i < count; i++) {
            print_gpu(f, nv, i);
            nvml_device_info info;
            if (first_ok_cc < 0 && nvml_device_info_get(nv, i, &info) == 0 && info.cc_major >= 0 &&
                cc_supported(info.cc_major, info.cc_minor)) {
                first_ok_cc = info.cc_major;
                first_minor = info.cc_minor;
                first_mem = info.mem_total;
                snprintf(first_name, sizeof first_name, "GPU %d (%s)", i, info.name);
            }
            err_clear();
        }
    }
    cpu_info c;
    cpu_info_read(&c);
    print_cpu(f, &c);
    int threads = omp_get_max_threads();
    /* The CUDA module: loaded here whatever the driver says (this command
     * is where one looks for why the GPU is not used), then asked for the GPU. */
    char mod[1024], cwhy[768] = "";
    fprintf(f, "CUDA module: %s\n", cuda_module_describe(mod, sizeof mod, 1));
    const bertc_cuda_api *api = cuda_module_loaded();
    int cuda_ok = 0;
    char mod_gpu[160] = "";
    if (api && count == 0) {
        /* No driver for NVML, but the module has a device: the CPU stand-in
         * (tests/cudaemu), whose name says so. --device cuda uses it. */
        char pname[128], pwhy[256];
        int pma = 0, pmi = 0;
        int64_t ptot = 0;
        if (api->probe(0, pname, sizeof pname, &pma, &pmi, &ptot, pwhy, sizeof pwhy)) {
            fprintf(f, "  GPU 0 of the CUDA module (no NVML): %s, compute %d.%d, %.1f GiB; --device cuda uses it\n",
                    pname, pma, pmi, (double)ptot / GIB);
            snprintf(mod_gpu, sizeof mod_gpu, " (--device cuda: %.120s)", pname);
        }
        err_clear();
    }
    if (api && first_ok_cc >= 0) {
        char pname[128];
        int pma = 0, pmi = 0;
        int64_t ptot = 0;
        cuda_ok = api->probe(0, pname, sizeof pname, &pma, &pmi, &ptot, cwhy, sizeof cwhy);
    }
    if (first_ok_cc >= 0 && cuda_ok) {
        fprintf(f, "bertc will use: %s with the CUDA backend, precision %s (--precision auto)\n", first_name,
                devices_auto_precision(first_ok_cc, first_minor));
    } else {
        char why_cpu[1024];
        if (count == 0) snprintf(why_cpu, sizeof why_cpu, "no GPU%s", mod_gpu);
        else if (first_ok_cc < 0) snprintf(why_cpu, sizeof why_cpu, "no GPU of compute capability 7.5 or newer");
        else if (!api) snprintf(why_cpu, sizeof why_cpu, "no CUDA backend: %s", cuda_module_why());
        else snprintf(why_cpu, sizeof why_cpu, "the CUDA backend finds no usable GPU: %s", cwhy);
        int bf16 = cpu_kernels_bf16(NULL, 0) == 0;
        if (!bf16) err_clear();
        fprintf(f, "bertc will use: the CPU backend (%s + OpenMP), %d thread(s) (--threads or "
                   "OMP_NUM_THREADS to change), precision fp32%s; reason: %s\n",
                cpu_kernels_onednn_sgemm() ? "oneDNN" : "OpenBLAS", threads,
                bf16 ? " (this CPU also trains with --precision bf16)" : "", why_cpu);
    }
    print_planner(f, first_mem, first_ok_cc);
    if (nv) nvml_close(nv);
}

char *devices_hardware_line(char *buf, size_t cap)
{
    if (!cap) return buf;
    buf[0] = 0;
    size_t n = 0;
    nvml_lib *nv = NULL;
    int count = 0;
    if (nvml_open(&nv) == 0 && nvml_device_count(nv, &count) == 0 && count > 0) {
        nvml_device_info info;
        if (nvml_device_info_get(nv, 0, &info) == 0) {
            int w = snprintf(buf, cap, "GPU 0 of %d: %s (%.1f GiB, compute %d.%d) | ", count,
                             info.name[0] ? info.name : "unknown", info.mem_total / GIB, info.cc_major, info.cc_minor);
            if (w > 0) n = (size_t)w < cap ? (size_t)w : cap - 1;
        }
    }
    err_clear();
    if (nv) nvml_close(nv);
    cpu_info c;
    cpu_info_read(&c);
    char flags[160];
    if (n < cap)
        snprintf(buf + n, cap - n, "CPU: %s, %d threads usable, %s, %.1f GiB", c.model[0] ? c.model : "unknown",
                 c.usable, cpu_flags_string(&c, flags, sizeof flags), c.mem_total / GIB);
    return buf;
}
