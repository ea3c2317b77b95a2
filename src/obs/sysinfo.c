/* /proc and /sys readings for the monitor and `bertc devices`. The monitor
 * calls proc_sample_read every second, so it uses plain read(2) into stack
 * buffers and the clock for CPU time (core/clock.h), not /proc/self/stat.
 * The vector units are cpu_isa's (the one CPUID reader), so `bertc devices`
 * and `bertc version` say the same. */
#define _GNU_SOURCE
#include "obs/sysinfo.h"

#include "backend/cpu/cpu_isa.h"
#include "core/clock.h"

#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads up to cap-1 bytes of a small file; -1 when it cannot be read. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

/* "Key:   123 kB" in /proc/meminfo, in bytes; NaN when absent. */
static double meminfo_field(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, key, kl) && p[kl] == ':') return strtod(p + kl + 1, NULL) * 1024.0;
    }
    return NAN;
}

/* The cgroup memory limit and use (v2, then v1); NaN when unlimited or
 * unknown. *kind caches which one applies (0 = look), so the monitor reads
 * no cgroup file at all on a machine without a limit. */
static void cgroup_memory(int *kind, double *limit, double *used)
{
    char b[64];
    *limit = *used = NAN;
    if (*kind == 0 || *kind == 2) {
        if (read_small("/sys/fs/cgroup/memory.max", b, sizeof b) > 0) {
            if (strncmp(b, "max", 3) != 0) *limit = strtod(b, NULL);
            if (isfinite(*limit) && read_small("/sys/fs/cgroup/memory.current", b, sizeof b) > 0) *used = strtod(b, NULL);
            *kind = isfinite(*limit) ? 2 : 1;
            return;
        }
    }
    if (*kind == 0 || *kind == 3) {
        if (read_small("/sys/fs/cgroup/memory/memory.limit_in_bytes", b, sizeof b) > 0) {
            double l = strtod(b, NULL);
            if (l > 0 && l < 1e18) *limit = l; /* "unlimited" is a huge number in v1 */
            if (isfinite(*limit) && read_small("/sys/fs/cgroup/memory/memory.usage_in_bytes", b, sizeof b) > 0)
                *used = strtod(b, NULL);
            *kind = isfinite(*limit) ? 3 : 1;
            return;
        }
    }
    *kind = 1;
}

static void memory_now(int *kind, double *total, double *avail, int *cgroup)
{
    char text[4096];
    *total = *avail = NAN;
    if (cgroup) *cgroup = 0;
    if (read_small("/proc/meminfo", text, sizeof text) > 0) {
        *total = meminfo_field(text, "MemTotal");
        *avail = meminfo_field(text, "MemAvailable");
    }
    double lim = NAN, used = NAN;
    if (*kind != 1) cgroup_memory(kind, &lim, &used);
    if (isfinite(lim) && (!isfinite(*total) || lim < *total)) {
        *total = lim;
        if (isfinite(used) && (!isfinite(*avail) || lim - used < *avail)) *avail = lim - used > 0 ? lim - used : 0;
        if (cgroup) *cgroup = 1;
    }
}

void proc_sample_read(proc_cpu_state *st, proc_sample *s)
{
    double cpu = clock_cpu_s(), wall = clock_now_s();
    s->cpu_pct = NAN;
    if (st->wall_s > 0 && wall > st->wall_s) s->cpu_pct = 100.0 * (cpu - st->cpu_s) / (wall - st->wall_s);
    st->cpu_s = cpu;
    st->wall_s = wall;
    char b[256];
    s->rss = NAN;
    if (read_small("/proc/self/statm", b, sizeof b) > 0) {
        char *p = b;
        strtod(p, &p); /* size */
        double pages = strtod(p, NULL);
        s->rss = pages * (double)sysconf(_SC_PAGESIZE);
    }
    memory_now(&st->cgroup, &s->mem_total, &s->mem_avail, NULL);
}

/* The vector units from cpu_isa: an instruction set counts when the CPU
 * has it and the OS saves its registers (as /proc/cpuinfo's flags, which
 * the kernel clears otherwise). */
static void flags_from_isa(cpu_info *c)
{
    const cpu_isa_info *k = &cpu_isa()->cpu;
    c->avx2 = k->avx2 && k->os_ymm;
    c->fma = k->fma && k->os_ymm;
    c->avx512f = k->avx512f && k->os_zmm;
    c->avx512bw = k->avx512bw && k->os_zmm;
    c->avx512_vnni = k->avx512_vnni && k->os_zmm;
    c->avx512_bf16 = k->avx512_bf16 && k->os_zmm;
    c->amx_bf16 = k->amx_bf16 && k->os_amx;
}

static int cgroup_cpu_quota(void)
{
    char b[128];
    if (read_small("/sys/fs/cgroup/cpu.max", b, sizeof b) <= 0 || !strncmp(b, "max", 3)) return 0;
    char *p;
    double quota = strtod(b, &p), period = strtod(p, NULL);
    if (!(quota > 0) || !(period > 0)) return 0;
    return (int)ceil(quota / period);
}

void cpu_info_read(cpu_info *c)
{
    memset(c, 0, sizeof *c);
    long on = sysconf(_SC_NPROCESSORS_ONLN);
    c->online = on > 0 ? (int)on : 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    c->usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : c->online;
    int quota = cgroup_cpu_quota();
    if (quota > 0 && quota < c->usable) c->usable = quota;

    flags_from_isa(c);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[8192];
        /* (physical id, core id) pairs seen, to count physical cores */
        enum { MAXC = 1024 };
        static const int none = -1;
        int pkg = none, ids[MAXC][2], nids = 0;
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            const char *val = colon + 1;
            while (*val == ' ' || *val == '\t') val++;
            if (!strncmp(line, "model name", 10) && !c->model[0]) {
                snprintf(c->model, sizeof c->model, "%s", val);
                c->model[strcspn(c->model, "\n")] = 0;
            } else if (!strncmp(line, "physical id", 11)) {
                pkg = atoi(val);
            } else if (!strncmp(line, "core id", 7)) {
                int core = atoi(val), seen = 0;
                for (int i = 0; i < nids && !seen; i++) seen = ids[i][0] == pkg && ids[i][1] == core;
                if (!seen && nids < MAXC) {
                    ids[nids][0] = pkg;
                    ids[nids][1] = core;
                    nids++;
                }
            }
        }
        fclose(f);
        c->physical = nids;
    }
    int kind = 0;
    memory_now(&kind, &c->mem_total, &c->mem_avail, &c->mem_cgroup);
}

char *cpu_flags_string(const cpu_info *c, char *buf, size_t cap)
{
    if (!cap) return buf;
    buf[0] = 0;
    const struct { int on; const char *name; } fl[] = {
        {c->avx2, "AVX2"}, {c->fma, "FMA"}, {c->avx512f, "AVX-512F"}, {c->avx512bw, "AVX-512BW"},
        {c->avx512_vnni, "AVX512-VNNI"}, {c->avx512_bf16, "AVX512-BF16"}, {c->amx_bf16, "AMX-BF16"},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        if (!fl[i].on) continue;
        int w = snprintf(buf + n, cap - n, "%s%s", n ? " " : "", fl[i].name);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
    if (!n) snprintf(buf, cap, "no AVX2 or AVX-512");
    return buf;
}
