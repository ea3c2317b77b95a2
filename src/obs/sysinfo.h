/* The machine and the process, from /proc, /sys and cpu_isa (CPUID): what the monitor
 * samples every second (cheap reads only) and what `bertc devices`
 * describes once. Linux; on a missing file a value is NaN / 0, never an
 * error, so the monitor keeps going in odd containers. */
#ifndef BERTC_OBS_SYSINFO_H
#define BERTC_OBS_SYSINFO_H

#include <stddef.h>

typedef struct {
    double cpu_s, wall_s; /* previous reading, for the CPU-use rate */
    int cgroup;           /* 0 not looked yet, 1 no memory limit, 2 v2 limit, 3 v1 limit */
} proc_cpu_state;

typedef struct {
    double cpu_pct;   /* process CPU time / wall time since the previous sample; 100 = one core busy */
    double rss;       /* resident set of this process, bytes */
    double mem_avail; /* MemAvailable of the machine (or of the cgroup limit when that is lower), bytes */
    double mem_total; /* MemTotal (or the cgroup limit), bytes */
} proc_sample;

/* The first call (st zeroed) only primes st: its cpu_pct is NaN. */
void proc_sample_read(proc_cpu_state *st, proc_sample *s);

typedef struct {
    char model[128];   /* "AMD EPYC 7B13", "" when unknown */
    int online;        /* logical CPUs online */
    int usable;        /* logical CPUs this process may run on (affinity, cgroup quota) */
    int physical;      /* physical cores (0 when unknown) */
    int avx2, fma, avx512f, avx512bw, avx512_vnni, avx512_bf16, amx_bf16;
    double mem_total, mem_avail; /* bytes, as proc_sample */
    int mem_cgroup;    /* 1 when mem_total is a cgroup limit */
} cpu_info;

void cpu_info_read(cpu_info *c);

/* "AVX2 FMA AVX-512F AVX512-BF16 ..." or "none of AVX2/AVX-512". Returns buf. */
char *cpu_flags_string(const cpu_info *c, char *buf, size_t cap);

#endif
