/* cudaemu's race detector (racecheck builds: CUDAEMU_RACECHECK).
 *
 * The kernels' sources are compiled with -fsanitize=thread, which makes the
 * compiler call __tsan_read4(addr), __tsan_write8(addr), ... before every
 * load and store; no ThreadSanitizer runtime is linked, these are the hooks
 * (docs/cudaemu.md says why). While a kernel runs (t_cur set), each access
 * is checked and recorded in shadow memory:
 *
 *   - device memory (cudaMalloc, which takes it from one reserved region
 *     here, so that "is it device memory" is one comparison and its shadow
 *     lies at a fixed distance): per 2-byte granule the last write and two
 *     reads (block, thread, barrier phase, warp clock), per launch (a 4 KiB
 *     page's shadow is cleared when a launch first touches it); and one bit
 *     per byte that says whether anything ever wrote it;
 *   - dynamic shared memory and static __shared__ arrays (thread_local, in
 *     the executable's TLS block), the same per block run.
 *
 * Two accesses of one block conflict when their threads differ, one
 * writes, they fall in one barrier phase, and no warp-synchronous call
 * (shuffle, ballot, __syncwarp, warp_collective) with both lanes in its
 * mask came between them (a vector clock over the warp's lanes). Two
 * accesses of device memory by different blocks of one launch conflict
 * when one writes. An access outside every tensor the kernel's pointer
 * arguments point into (annotated sub-buffers, else whole allocations), a
 * read of device memory nothing wrote, a read of shared memory no thread
 * of the block wrote, and an access past the block's dynamic shared memory
 * stop the run too. Each report names the kernel, the block, both threads,
 * the address, the argument, tensor or __shared__ array, and the schedule's
 * seed (CUDAEMU_SEED replays it). */
#include "cuda_runtime.h"
#include "exec_internal.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

using namespace cudaemu;

extern "C" int cudaemu_alloc_near(const void *p, uintptr_t *base, size_t *bytes); /* cudaemu_mem.cc */

namespace {

/* ------------------------------------------------------------------------
 * The device region and its shadow. */

const size_t REGION = (size_t)256 << 30; /* virtual; pages exist where touched */
const size_t PAGE = 4096, GRAN_PER_PAGE = PAGE / 2;
uintptr_t g_lo;   /* the region (0 until the first cudaMalloc) */
size_t g_size;
size_t g_top;     /* bytes handed out */
uint64_t *g_shadow; /* 3 records (write, read, read) per 2-byte granule */
uint32_t *g_gen;  /* per page: the launch its shadow belongs to */
uint8_t *g_init;  /* a bit per byte: written since cudaMalloc */
std::mutex g_mu;

void *reserve(size_t bytes)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) cudaemu_fatal("racecheck: cannot reserve %zu GiB of address space for the shadow", bytes >> 30);
    return m;
}

void region_init(void)
{
    if (g_lo) return;
    g_shadow = (uint64_t *)reserve(REGION / 2 * 3 * sizeof(uint64_t));
    g_gen = (uint32_t *)reserve(REGION / PAGE * sizeof(uint32_t));
    g_init = (uint8_t *)reserve(REGION / 8);
    char *b = (char *)reserve(REGION);
    g_size = REGION;
    __atomic_store_n(&g_lo, (uintptr_t)b, __ATOMIC_RELEASE);
}

void release(void *p, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)p + PAGE - 1) & ~(uintptr_t)(PAGE - 1), hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(PAGE - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ------------------------------------------------------------------------
 * Records: valid(1) block(22) thread(10) phase(16) epoch(15). */

const uint64_t VALID = 1ull << 63;
inline uint64_t rec_make(uint32_t block, unsigned tid, uint32_t phase, unsigned epoch)
{
    return VALID | (uint64_t)(block & 0x3fffffu) << 41 | (uint64_t)(tid & 0x3ffu) << 31 |
           (uint64_t)(phase & 0xffffu) << 15 | (uint64_t)(epoch > 0x7fffu ? 0x7fffu : epoch);
}
inline uint32_t rec_block(uint64_t r) { return (uint32_t)(r >> 41) & 0x3fffffu; }
inline unsigned rec_tid(uint64_t r) { return (unsigned)(r >> 31) & 0x3ffu; }
inline uint32_t rec_phase(uint64_t r) { return (uint32_t)(r >> 15) & 0xffffu; }
inline unsigned rec_epoch(uint64_t r) { return (unsigned)r & 0x7fffu; }

enum { ORDERED = 0, SAME_BLOCK = 1, OTHER_BLOCK = 2 };

/* Whether the access recorded in r and the running thread's access are
 * ordered. */
inline int relation(uint64_t r, const pool *p, unsigned tid)
{
    if (!(r & VALID)) return ORDERED;
    if (rec_block(r) != (p->rc_block & 0x3fffffu)) return OTHER_BLOCK;
    unsigned ot = rec_tid(r);
    if (ot == tid || rec_phase(r) != (p->rc_phase & 0xffffu)) return ORDERED;
    if ((ot >> 5) == (tid >> 5)) {
        unsigned seen = p->rc_vc[tid][ot & 31];
        if ((seen > 0x7fffu ? 0x7fffu : seen) >= rec_epoch(r)) return ORDERED;
    }
    return SAME_BLOCK;
}

/* ------------------------------------------------------------------------
 * The running launch. */

/* A tensor of the launch: where a pointer argument points (the annotated
 * sub-buffer or the allocation), or an entry of a table argument
 * (CUDAEMU_ANNOTATE_TABLE: entry >= 0, its field, its extent). */
struct arg_range {
    uintptr_t lo, hi;
    int arg, entry;
    const char *field;
    char name[96];
};

struct launch_state {
    const char *kernel, *argtext;
    const void *const *ptrs;
    int nargs;
    std::vector<arg_range> r; /* in argument order, for naming */
    /* for "is it inside a tensor": (lo, hi) sorted by lo, and the largest
     * hi up to each */
    std::vector<std::pair<uintptr_t, uintptr_t>> by_lo;
    std::vector<uintptr_t> max_hi;
    int nr;
    uint32_t id;
} L;

/* Whether [a, a + sz) lies inside one tensor of the launch. */
inline int in_tensor(uintptr_t a, unsigned sz)
{
    size_t j = (size_t)(std::upper_bound(L.by_lo.begin(), L.by_lo.end(), std::make_pair(a, UINTPTR_MAX)) -
                        L.by_lo.begin());
    while (j-- > 0 && L.max_hi[j] >= a + sz)
        if (L.by_lo[j].second >= a + sz) return 1;
    return 0;
}

unsigned long long g_serial;

/* ------------------------------------------------------------------------
 * Per OS thread: where its pool's stacks, dynamic shared memory and the
 * executable's TLS (static __shared__ arrays) lie, and their shadows. */

struct local_ent {
    uint64_t tag; /* the block run's serial << 2 | the 2 bytes' written bits */
    uint64_t rec[3];
};

struct rtls_t {
    int ready;
    uintptr_t stacks_lo, dyn_lo, tls_lo, tcur;
    size_t stacks_sz, tls_sz;
    local_ent *dyn_sh, *tls_sh;
};
__thread rtls_t rt;

struct tls_find {
    uintptr_t probe, lo;
    size_t sz;
};

int tls_cb(struct dl_phdr_info *info, size_t, void *data)
{
    tls_find *f = (tls_find *)data;
    if (!info->dlpi_tls_data) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS) {
            uintptr_t lo = (uintptr_t)info->dlpi_tls_data;
            size_t sz = info->dlpi_phdr[i].p_memsz;
            if (f->probe >= lo && f->probe < lo + sz) {
                f->lo = lo;
                f->sz = sz;
                return 1;
            }
        }
    return 0;
}

void rtls_init(pool *p)
{
    rt.stacks_lo = (uintptr_t)p->stacks;
    rt.stacks_sz = (size_t)STACK_STRIDE * MAX_THREADS;
    rt.dyn_lo = (uintptr_t)p->dyn;
    rt.tcur = (uintptr_t)&t_cur;
    /* the static __shared__ arrays are thread_local in the module that
     * holds t_cur (the kernels are linked with the stand-in) */
    tls_find f = {(uintptr_t)&t_cur, 0, 0};
    dl_iterate_phdr(tls_cb, &f);
    rt.tls_lo = f.lo;
    rt.tls_sz = f.sz;
    rt.dyn_sh = (local_ent *)calloc(DYN_SHARED_MAX / 2, sizeof(local_ent));
    rt.tls_sh = (local_ent *)calloc(f.sz / 2 + 1, sizeof(local_ent));
    if (!rt.dyn_sh || !rt.tls_sh) cudaemu_fatal("racecheck: out of memory for the shared-memory shadow");
    rt.ready = 1;
}

/* ------------------------------------------------------------------------
 * Naming what an address is. */

/* The name of the executable's TLS symbol (a static __shared__ array) at
 * offset off of the TLS block, demangled; 0 when none. */
int tls_symbol(size_t off, char *out, size_t cap, size_t *within)
{
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0) return 0;
    struct stat st;
    int found = 0;
    if (fstat(fd, &st) == 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            const char *b = (const char *)m;
            const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
            const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
            for (int i = 0; i < eh->e_shnum && !found; i++) {
                if (sh[i].sh_type != SHT_SYMTAB) continue;
                const Elf64_Sym *sym = (const Elf64_Sym *)(b + sh[i].sh_offset);
                const char *str = b + sh[sh[i].sh_link].sh_offset;
                size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
                for (size_t k = 0; k < n; k++) {
                    if (ELF64_ST_TYPE(sym[k].st_info) != STT_TLS) continue;
                    if (off < sym[k].st_value || off >= sym[k].st_value + (sym[k].st_size ? sym[k].st_size : 1))
                        continue;
                    const char *nm = str + sym[k].st_name;
                    int status = 0;
                    char *d = abi::__cxa_demangle(nm, NULL, NULL, &status);
                    snprintf(out, cap, "%s", d && !status ? d : nm);
                    free(d);
                    *within = off - sym[k].st_value;
                    found = 1;
                    break;
                }
            }
            munmap(m, (size_t)st.st_size);
        }
    }
    close(fd);
    return found;
}

void describe_tensor(const arg_range *r, char *out, size_t cap)
{
    char a[128];
    arg_text(L.argtext, r->arg, a, sizeof a);
    if (r->entry >= 0)
        snprintf(out, cap, "argument %d (%s), entry %d's %s (%zu bytes, in %s%s%s)", r->arg + 1, a, r->entry, r->field,
                 (size_t)(r->hi - r->lo), r->name[0] ? "tensor \"" : "an allocation", r->name, r->name[0] ? "\"" : "");
    else if (r->name[0])
        snprintf(out, cap, "argument %d (%s), tensor \"%s\" of %zu bytes", r->arg + 1, a, r->name, (size_t)(r->hi - r->lo));
    else snprintf(out, cap, "argument %d (%s), its allocation of %zu bytes", r->arg + 1, a, (size_t)(r->hi - r->lo));
}

/* What address a is: an argument's tensor, a __shared__ array, ... */
void describe(uintptr_t a, char *out, size_t cap)
{
    if (a - g_lo < g_size) {
        for (int i = 0; i < L.nr; i++)
            if (a >= L.r[i].lo && a < L.r[i].hi) {
                static char t[320];
                describe_tensor(&L.r[i], t, sizeof t);
                snprintf(out, cap, "byte %zu of %s", (size_t)(a - L.r[i].lo), t);
                return;
            }
        uintptr_t lo, hi;
        static char nm[96];
        if (cudaemu_tensor_of((const void *)a, &lo, &hi, nm, sizeof nm))
            snprintf(out, cap, "byte %zu of %s%s%s of %zu bytes, which no argument points into", (size_t)(a - lo),
                     nm[0] ? "tensor \"" : "an allocation", nm, nm[0] ? "\"" : "", (size_t)(hi - lo));
        else snprintf(out, cap, "device memory outside every allocation");
        return;
    }
    if (a - rt.dyn_lo < DYN_SHARED_MAX) {
        snprintf(out, cap, "byte %zu of the block's dynamic shared memory", (size_t)(a - rt.dyn_lo));
        return;
    }
    if (a - rt.tls_lo < rt.tls_sz) {
        static char nm[256];
        size_t within = 0;
        if (tls_symbol(a - rt.tls_lo, nm, sizeof nm, &within))
            snprintf(out, cap, "byte %zu of __shared__ %s", within, nm);
        else snprintf(out, cap, "static __shared__ memory");
        return;
    }
    snprintf(out, cap, "host memory");
}

void thread_name(const pool *p, unsigned tid, char *out, size_t cap)
{
    dim3 b = p->blk.bdim;
    snprintf(out, cap, "thread (%u,%u,%u)", tid % b.x, (tid / b.x) % b.y, tid / (b.x * b.y));
}

void block_name(const pool *p, uint32_t blk, char *out, size_t cap)
{
    dim3 g = p->blk.gdim;
    snprintf(out, cap, "block (%u,%u,%u)", blk % g.x, (blk / g.x) % g.y, blk / (g.x * g.y));
}

void schedule_note(char *out, size_t cap)
{
    snprintf(out, cap, "schedule: launch %llu of the run with CUDAEMU_SEED=%llu, which replays it", launch_no,
             (unsigned long long)base_seed);
}

__attribute__((noreturn)) void report_conflict(const pool *p, unsigned tid, uintptr_t a, unsigned sz, int wr,
                                               uint64_t other, int other_wr, int rel)
{
    static char what[512], who[64], sched[160];
    describe(a, what, sizeof what);
    thread_name(p, rec_tid(other), who, sizeof who);
    schedule_note(sched, sizeof sched);
    (void)tid;
    if (rel == OTHER_BLOCK) {
        static char blk[64];
        block_name(p, rec_block(other), blk, sizeof blk);
        cudaemu_fatal("racecheck: %s %u bytes at %p (%s), which %s, %s %s in the same launch: no two blocks of a "
                      "launch are ordered (%s)",
                      wr ? "writes" : "reads", sz, (void *)a, what, blk, who, other_wr ? "wrote" : "read", sched);
    }
    int same_warp = (rec_tid(other) >> 5) == (tid >> 5);
    cudaemu_fatal("racecheck: %s %u bytes at %p (%s), which %s of the block %s in the same barrier phase: no "
                  "__syncthreads() between them%s (%s)",
                  wr ? "writes" : "reads", sz, (void *)a, what, who, other_wr ? "wrote" : "read",
                  same_warp ? ", and no warp-synchronous call with both lanes in its mask" : "", sched);
}

/* One granule's records against the running thread's access. */
inline void granule(uint64_t *s, uint64_t cur, const pool *p, unsigned tid, uintptr_t a, unsigned sz, int wr)
{
    uint64_t w = __atomic_load_n(&s[0], __ATOMIC_RELAXED);
    int rel = relation(w, p, tid);
    if (rel) report_conflict(p, tid, a, sz, wr, w, 1, rel);
    uint64_t r1 = __atomic_load_n(&s[1], __ATOMIC_RELAXED), r2 = __atomic_load_n(&s[2], __ATOMIC_RELAXED);
    if (wr) {
        if ((rel = relation(r1, p, tid))) report_conflict(p, tid, a, sz, wr, r1, 0, rel);
        if ((rel = relation(r2, p, tid))) report_conflict(p, tid, a, sz, wr, r2, 0, rel);
        __atomic_store_n(&s[0], cur, __ATOMIC_RELAXED);
        __atomic_store_n(&s[1], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s[2], 0, __ATOMIC_RELAXED);
    } else if (relation(r1, p, tid) == ORDERED) {
        __atomic_store_n(&s[1], cur, __ATOMIC_RELAXED);
    } else if (relation(r2, p, tid) == ORDERED) {
        __atomic_store_n(&s[2], cur, __ATOMIC_RELAXED);
    }
}

/* The page's shadow, cleared when this launch first touches it. */
inline void page_ready(size_t pg)
{
    uint32_t g = __atomic_load_n(&g_gen[pg], __ATOMIC_ACQUIRE);
    if (g == L.id) return;
    const uint32_t BUSY = 0xffffffffu;
    if (g != BUSY && __atomic_compare_exchange_n(&g_gen[pg], &g, BUSY, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        memset(&g_shadow[pg * GRAN_PER_PAGE * 3], 0, GRAN_PER_PAGE * 3 * sizeof(uint64_t));
        __atomic_store_n(&g_gen[pg], L.id, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&g_gen[pg], __ATOMIC_ACQUIRE) != L.id) __builtin_ia32_pause();
}

__attribute__((noreturn)) void report_bounds(uintptr_t a, unsigned sz, int wr)
{
    /* the argument's tensor it ran past (or before) */
    const arg_range *best = NULL;
    size_t dist = (size_t)-1;
    int after = 1;
    for (int i = 0; i < L.nr; i++) {
        if (a >= L.r[i].hi && a - L.r[i].hi < dist) {
            dist = a - L.r[i].hi;
            best = &L.r[i];
            after = 1;
        }
        if (a + sz <= L.r[i].lo && L.r[i].lo - a < dist) {
            dist = L.r[i].lo - a;
            best = &L.r[i];
            after = 0;
        }
        if (a < L.r[i].hi && a + sz > L.r[i].lo) { /* straddles the end */
            dist = 0;
            best = &L.r[i];
            after = 1;
        }
    }
    static char lands[512] = "", t[320] = "", sched[160];
    uintptr_t lo, hi;
    static char nm[96];
    uintptr_t base;
    size_t ab;
    int near = cudaemu_alloc_near((const void *)a, &base, &ab);
    if (cudaemu_tensor_of((const void *)a, &lo, &hi, nm, sizeof nm) && nm[0])
        snprintf(lands, sizeof lands, "; it lands in tensor \"%s\" (%zu bytes at %p), which no argument of the kernel "
                 "points into", nm, (size_t)(hi - lo), (void *)lo);
    else if (near == 1)
        snprintf(lands, sizeof lands, "; it lands in a part of the device allocation of %zu bytes at %p that no "
                 "argument's tensor covers", ab, (void *)base);
    else if (near == 2 || near == 3)
        snprintf(lands, sizeof lands, "; it lands in the guard zone of the device allocation of %zu bytes at %p", ab,
                 (void *)base);
    else snprintf(lands, sizeof lands, "; it lands in no live device allocation (freed memory?)");
    if (best) describe_tensor(best, t, sizeof t);
    schedule_note(sched, sizeof sched);
    if (best)
    {
        static char how[96];
        if (dist) snprintf(how, sizeof how, "%zu bytes %s", dist, after ? "past the end of" : "before the start of");
        else snprintf(how, sizeof how, "%s", after ? "right past the end of" : "right before the start of");
        cudaemu_fatal("racecheck: %s %u bytes at %p, %s %s%s (%s)", wr ? "writes" : "reads", sz, (void *)a, how, t,
                      lands, sched);
    }
    cudaemu_fatal("racecheck: %s %u bytes at %p, device memory no pointer argument of the kernel points into%s (%s)",
                  wr ? "writes" : "reads", sz, (void *)a, lands, sched);
}

/* A read of memory nothing wrote is reported after the others: at the
 * block's next barrier or end (shared memory) or at the launch's end
 * (device memory), so that when a writer comes later in the same phase or
 * launch, the race, which names both threads, is what stops the run. */
struct pending_t {
    int set;
    char msg[1536];
};
__thread pending_t pend_shared;
pending_t pend_global;
std::mutex pend_mu;

void note_unwritten(pending_t *pd, const pool *p, unsigned tid, uintptr_t a, unsigned sz, const char *since)
{
    if (pd->set) return;
    static __thread char what[512], who[64], blk[64], sched[160];
    describe(a, what, sizeof what);
    thread_name(p, tid, who, sizeof who);
    block_name(p, p->rc_block, blk, sizeof blk);
    schedule_note(sched, sizeof sched);
    snprintf(pd->msg, sizeof pd->msg,
             "kernel %s, %s, %s: racecheck: reads %u bytes at %p (%s) that nothing has written %s (%s)", L.kernel, blk,
             who, sz, (void *)a, what, since, sched);
    pd->set = 1;
}

void flush_pending(pending_t *pd)
{
    if (pd->set) cudaemu_fatal("%s", pd->msg);
}

void global_access(pool *p, unsigned tid, uintptr_t a, unsigned sz, int wr)
{
    if (!in_tensor(a, sz)) report_bounds(a, sz, wr);
    size_t off = a - g_lo;
    for (size_t b = off; b < off + sz; b++) {
        uint8_t bit = (uint8_t)(1u << (b & 7));
        if (wr) {
            if (!(g_init[b >> 3] & bit)) __atomic_fetch_or(&g_init[b >> 3], bit, __ATOMIC_RELAXED);
        } else if (!(g_init[b >> 3] & bit) && !pend_global.set) {
            std::lock_guard<std::mutex> lock(pend_mu);
            note_unwritten(&pend_global, p, tid, a, sz, "since cudaMalloc (no copy, memset, kernel, cuBLASLt or sort wrote it)");
        }
    }
    uint64_t cur = rec_make(p->rc_block, tid, p->rc_phase, p->rc_vc[tid][tid & 31]);
    size_t last_pg = (size_t)-1;
    for (size_t g = off >> 1; g <= (off + sz - 1) >> 1; g++) {
        size_t pg = g / GRAN_PER_PAGE;
        if (pg != last_pg) {
            page_ready(pg);
            last_pg = pg;
        }
        granule(&g_shadow[g * 3], cur, p, tid, a, sz, wr);
    }
}

void local_access(local_ent *sh, uintptr_t off, pool *p, unsigned tid, uintptr_t a, unsigned sz, int wr,
                  const char *since)
{
    uint64_t cur = rec_make(p->rc_block, tid, p->rc_phase, p->rc_vc[tid][tid & 31]);
    uint64_t serial = p->rc_serial << 2;
    for (uintptr_t g = off >> 1; g <= (off + sz - 1) >> 1; g++) {
        local_ent *e = &sh[g];
        if ((e->tag & ~3ull) != serial) {
            e->tag = serial;
            e->rec[0] = e->rec[1] = e->rec[2] = 0;
        }
        /* the bytes of this granule the access covers */
        uintptr_t b0 = g * 2 < off ? off : g * 2, b1 = g * 2 + 2 > off + sz ? off + sz : g * 2 + 2;
        uint64_t bits = 0;
        for (uintptr_t b = b0; b < b1; b++) bits |= 1ull << (b & 1);
        if (wr) e->tag |= bits;
        else if ((e->tag & bits) != bits) note_unwritten(&pend_shared, p, tid, a, sz, since);
        granule(e->rec, cur, p, tid, a, sz, wr);
    }
}

inline void on_access(void *addr, unsigned sz, int wr)
{
    ethread *t = t_cur;
    if (__builtin_expect(!t, 1)) return;
    uintptr_t a = (uintptr_t)addr;
    pool *p = t_pool;
    unsigned tid = (unsigned)((fiber *)t - p->f);
    if (a - g_lo < g_size) return global_access(p, tid, a, sz, wr);
    if (a - rt.stacks_lo < rt.stacks_sz) return;
    if (a - rt.dyn_lo < DYN_SHARED_MAX) {
        if (a - rt.dyn_lo + sz > p->shared_bytes) {
            static char sched[160];
            schedule_note(sched, sizeof sched);
            cudaemu_fatal("racecheck: %s %u bytes at byte %zu of the block's dynamic shared memory, past its %zu "
                          "bytes (%s)",
                          wr ? "writes" : "reads", sz, (size_t)(a - rt.dyn_lo), p->shared_bytes, sched);
        }
        return local_access(rt.dyn_sh, a - rt.dyn_lo, p, tid, a, sz, wr, "in this block (dynamic shared memory "
                                                                          "starts as garbage)");
    }
    if (a - rt.tls_lo < rt.tls_sz) {
        if (a == rt.tcur) return; /* threadIdx and friends read t_cur */
        return local_access(rt.tls_sh, a - rt.tls_lo, p, tid, a, sz, wr,
                            "in this block (a __shared__ array holds what an earlier block left)");
    }
}

} // namespace

/* ------------------------------------------------------------------------
 * The scheduler's calls. */

void cudaemu::race_launch_begin(const char *kernel, const char *argtext, const void *const *ptrs, int nargs)
{
    L.kernel = kernel;
    L.argtext = argtext;
    L.ptrs = ptrs;
    L.nargs = nargs;
    L.r.clear();
    if (++L.id == 0xffffffffu) L.id = 1;
    for (int i = 0; i < nargs; i++) {
        arg_range r;
        if (!ptrs[i] || !cudaemu_tensor_of(ptrs[i], &r.lo, &r.hi, r.name, sizeof r.name)) continue;
        r.arg = i;
        r.entry = -1;
        r.field = NULL;
        L.r.push_back(r);
    }
    for (const table_tensor &t : launch_tables()) {
        arg_range r;
        r.lo = t.lo;
        r.hi = t.hi;
        r.arg = t.arg;
        r.entry = t.entry;
        r.field = t.field;
        memcpy(r.name, t.name, sizeof r.name);
        L.r.push_back(r);
    }
    L.nr = (int)L.r.size();
    L.by_lo.clear();
    for (const arg_range &r : L.r) L.by_lo.push_back(std::make_pair(r.lo, r.hi));
    std::sort(L.by_lo.begin(), L.by_lo.end());
    L.max_hi.resize(L.by_lo.size());
    for (size_t j = 0; j < L.by_lo.size(); j++)
        L.max_hi[j] = j && L.max_hi[j - 1] > L.by_lo[j].second ? L.max_hi[j - 1] : L.by_lo[j].second;
}

void cudaemu::race_launch_end(void)
{
    flush_pending(&pend_global);
    L.r.clear();
    L.by_lo.clear();
    L.nr = 0;
}

void cudaemu::race_block_end(pool *p)
{
    (void)p;
    flush_pending(&pend_shared);
}

void cudaemu::race_block_begin(pool *p, uint32_t block)
{
    if (!rt.ready) rtls_init(p);
    p->rc_block = block;
    p->rc_serial = __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED);
    p->rc_phase = 0;
    race_barrier(p);
    p->rc_phase = 0;
}

void cudaemu::race_barrier(pool *p)
{
    flush_pending(&pend_shared);
    p->rc_phase++;
    memset(p->rc_vc, 0, (size_t)p->n * sizeof p->rc_vc[0]);
    for (int t = 0; t < p->n; t++) p->rc_vc[t][t & 31] = 1;
}

void cudaemu::race_warp_sync(pool *p, int base, unsigned mask)
{
    uint16_t join[32] = {0};
    int lanes = p->n - base < 32 ? p->n - base : 32;
    for (int l = 0; l < lanes; l++)
        if ((mask >> l) & 1u)
            for (int j = 0; j < 32; j++)
                if (p->rc_vc[base + l][j] > join[j]) join[j] = p->rc_vc[base + l][j];
    for (int l = 0; l < lanes; l++)
        if ((mask >> l) & 1u) {
            memcpy(p->rc_vc[base + l], join, sizeof join);
            if (p->rc_vc[base + l][l] < 0xffffu) p->rc_vc[base + l][l]++;
        }
}

/* ------------------------------------------------------------------------
 * Device memory for cudaemu_mem.cc. */

extern "C" char *cudaemu_race_alloc(size_t bytes)
{
    std::lock_guard<std::mutex> lock(g_mu);
    region_init();
    size_t n = (bytes + PAGE - 1) & ~(PAGE - 1); /* page-aligned, so that a free can give pages back */
    if (n > g_size - g_top) return NULL;
    char *p = (char *)g_lo + g_top;
    g_top += n; /* never reused: a stale pointer stays outside every allocation */
    return p;
}

extern "C" void cudaemu_race_free(char *raw, size_t bytes)
{
    size_t off = (uintptr_t)raw - g_lo, n = (bytes + PAGE - 1) & ~(PAGE - 1);
    release(raw, n);
    release(&g_shadow[off / 2 * 3], n / 2 * 3 * sizeof(uint64_t));
    release(&g_init[off / 8], n / 8);
}

extern "C" void cudaemu_race_mark(const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    if (a - g_lo >= g_size || !bytes) return;
    size_t b = a - g_lo, e = b + bytes;
    for (; b < e && (b & 7); b++) g_init[b >> 3] |= (uint8_t)(1u << (b & 7));
    if (e - b >= 8) {
        memset(&g_init[b >> 3], 0xff, (e - b) >> 3);
        b += (e - b) & ~(size_t)7;
    }
    for (; b < e; b++) g_init[b >> 3] |= (uint8_t)(1u << (b & 7));
}

/* ------------------------------------------------------------------------
 * The compiler's hooks (-fsanitize=thread without its runtime). */

#define HOOK(n)                                                                                               \
    extern "C" void __tsan_read##n(void *a) { on_access(a, n, 0); }                                          \
    extern "C" void __tsan_write##n(void *a) { on_access(a, n, 1); }                                         \
    extern "C" void __tsan_unaligned_read##n(void *a) { on_access(a, n, 0); }                                \
    extern "C" void __tsan_unaligned_write##n(void *a) { on_access(a, n, 1); }
HOOK(1)
HOOK(2)
HOOK(4)
HOOK(8)
HOOK(16)
extern "C" void __tsan_read_range(void *a, unsigned long n)
{
    if (n) on_access(a, (unsigned)n, 0);
}
extern "C" void __tsan_write_range(void *a, unsigned long n)
{
    if (n) on_access(a, (unsigned)n, 1);
}
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void __tsan_vptr_update(void **, void *) {}
extern "C" void __tsan_vptr_read(void **) {}
/* clang's instrumentation turns memcpy, memmove and memset into these */
extern "C" void *__tsan_memcpy(void *d, const void *s, unsigned long n)
{
    if (n) {
        on_access((void *)s, (unsigned)n, 0);
        on_access(d, (unsigned)n, 1);
    }
    return memcpy(d, s, n);
}
extern "C" void *__tsan_memmove(void *d, const void *s, unsigned long n)
{
    if (n) {
        on_access((void *)s, (unsigned)n, 0);
        on_access(d, (unsigned)n, 1);
    }
    return memmove(d, s, n);
}
extern "C" void *__tsan_memset(void *d, int c, unsigned long n)
{
    if (n) on_access(d, (unsigned)n, 1);
    return memset(d, c, n);
}
