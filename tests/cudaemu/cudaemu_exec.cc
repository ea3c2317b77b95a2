/* cudaemu's execution model: grids of blocks on OpenMP threads, the
 * threads of a block as cooperative fibers (include/cudaemu_exec.h).
 *
 * A fiber runs until it reaches __syncthreads() or a warp intrinsic, or
 * returns; then the block's scheduler (the OS thread's own stack) runs the
 * next fiber. When no fiber can run, the scheduler resolves what they wait
 * for: a warp intrinsic whose mask's lanes have all arrived (with the same
 * mask) completes; a barrier completes when every thread of the block waits
 * at one. Anything else is a deadlock on a real GPU, and stops the run with
 * the kernel, the block and the threads named. The fibers' order is drawn
 * afresh for every barrier phase, and the blocks' order for every launch,
 * from a seed (CUDAEMU_SEED, mixed with the launch's number), so that a
 * read that misses its barrier sees stale data in some phases whichever
 * side of the writer it is, and the same seed replays the same schedules.
 *
 * Context switches are a few instructions of assembly (x86-64: callee-saved
 * registers and the stack pointer). Each fiber has its own 16 KiB stack
 * above a guard page; the stacks' tops are staggered by 64 bytes so that
 * they do not all fall into the same cache sets (with a stride of a whole
 * number of pages, 128 fibers' hot stack lines thrash a few L1 sets). */
#include "cuda_runtime.h"
#include "exec_internal.h"

#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#if !defined(__x86_64__)
#error "cudaemu's fibers switch stacks in x86-64 assembly"
#endif

namespace cudaemu {

__thread ethread *t_cur;
__thread pool *t_pool;
unsigned long long launch_no;
uint64_t base_seed;

} // namespace cudaemu

using namespace cudaemu;

/* ------------------------------------------------------------------------
 * Stopping the run. */

static int fatal_once;

static void where(char *buf, size_t cap)
{
    buf[0] = 0;
    ethread *t = t_cur;
    pool *p = t_pool;
    if (!t || !p) return;
    snprintf(buf, cap, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u): ", p->kernel, t->blk->bidx.x, t->blk->bidx.y,
             t->blk->bidx.z, t->tid.x, t->tid.y, t->tid.z);
}

extern "C" void cudaemu_fatal(const char *fmt, ...)
{
    if (__atomic_exchange_n(&fatal_once, 1, __ATOMIC_SEQ_CST)) {
        for (;;) pause(); /* another thread is reporting; it exits */
    }
    static char at[320], msg[2048]; /* static: a fiber's stack is 16 KiB */
    where(at, sizeof at);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudaemu: %s%s\n", at, msg);
    fflush(stderr);
    fflush(stdout);
    _exit(70);
}

/* ------------------------------------------------------------------------
 * Fibers. */

extern "C" void cudaemu_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".globl cudaemu_switch\n"
    ".hidden cudaemu_switch\n"
    ".type cudaemu_switch,@function\n"
    "cudaemu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size cudaemu_switch, .-cudaemu_switch\n");

static void fiber_main(void);

/* From a fiber back to its block's scheduler. */
static void to_scheduler(fiber *f)
{
    cudaemu_switch(&f->sp, t_pool->sched_sp);
}

/* Runs f until it yields or returns. */
static void run_fiber(pool *p, fiber *f)
{
    t_cur = &f->et;
    cudaemu_switch(&p->sched_sp, f->sp);
    t_cur = NULL;
}

static void fiber_main(void)
{
    pool *p = t_pool;
    fiber *f = (fiber *)t_cur; /* et is the first member */
    p->fn(p->closure);
    f->state = ST_DONE;
    p->ndone++;
    to_scheduler(f);
    __builtin_unreachable();
}

static void fiber_start(pool *p, int i)
{
    fiber *f = &p->f[i];
    char *top = p->stacks + (size_t)(i + 1) * STACK_STRIDE - (size_t)(i % 32) * 64;
    uintptr_t sp = ((uintptr_t)top & ~(uintptr_t)15) - 64;
    void **s = (void **)sp;
    for (int r = 0; r < 6; r++) s[r] = 0; /* r15 r14 r13 r12 rbx rbp */
    s[6] = (void *)&fiber_main;           /* ret lands here with rsp = 8 mod 16, as after a call */
    s[7] = 0;
    f->sp = (void *)sp;
    f->state = ST_RUN;
}

static pool *get_pool(void)
{
    if (t_pool) return t_pool;
    pool *p = (pool *)calloc(1, sizeof *p);
    size_t bytes = (size_t)STACK_STRIDE * MAX_THREADS;
    void *m = p ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
    if (m == MAP_FAILED) cudaemu_fatal("cannot allocate the fibers' stacks (%zu MiB)", bytes >> 20);
    p->stacks = (char *)m;
    for (int i = 0; i < MAX_THREADS; i++) mprotect(p->stacks + (size_t)i * STACK_STRIDE, 4096, PROT_NONE);
    t_pool = p;
    return p;
}

/* ------------------------------------------------------------------------
 * Device side. */

void *cudaemu::dyn_shared(void)
{
    if (!t_cur) cudaemu_fatal("dynamic shared memory used outside a kernel");
    return t_pool->dyn;
}

void cudaemu::syncthreads(void)
{
    if (!t_cur) cudaemu_fatal("__syncthreads() called outside a kernel");
    fiber *f = (fiber *)t_cur;
    f->state = ST_BAR;
    t_pool->nbar++;
    to_scheduler(f);
}

uint64_t cudaemu::warp_op(shfl_kind kind, unsigned mask, uint64_t v, int arg, int width, const char *name)
{
    if (!t_cur) cudaemu_fatal("%s called outside a kernel", name);
    fiber *f = (fiber *)t_cur;
    if (width <= 0 || width > 32 || (width & (width - 1)))
        cudaemu_fatal("%s: width %d is not a power of two up to 32", name, width);
    f->call = warp_call{kind, name, mask, arg, width, v};
    f->state = ST_WARP;
    pool *p = t_pool;
    p->nwarp++;
    p->warp_waiting[(f - p->f) / 32] = 1;
    to_scheduler(f);
    return f->result;
}

void cudaemu::warp_collective(unsigned mask, const char *name)
{
    warp_op(SHFL_COLLECTIVE, mask, 0, 0, 32, name);
}

/* ------------------------------------------------------------------------
 * The scheduler of one block. */

static void block_fatal(pool *p, int thread, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
static void block_fatal(pool *p, int thread, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t_cur = &p->f[thread].et; /* so that the report names it */
    cudaemu_fatal("%s", msg);
}

static const char *state_name(int s)
{
    return s == ST_BAR ? "waits at __syncthreads()" : s == ST_DONE ? "has returned" : s == ST_WARP ? "waits in a warp intrinsic" : "runs";
}

/* Completes the warp intrinsics whose lanes have all arrived; returns how
 * many warps completed one; stops the run on a mismatch. */
static int resolve_warps(pool *p)
{
    int done = 0, nwarps = (p->n + 31) / 32;
    for (int w = 0; w < nwarps; w++) {
        if (!p->warp_waiting[w]) continue;
        p->warp_waiting[w] = 0;
        int base = w * 32, lanes = p->n - base < 32 ? p->n - base : 32, first = -1;
        for (int l = 0; l < lanes; l++)
            if (p->f[base + l].state == ST_WARP) {
                first = l;
                break;
            }
        if (first < 0) continue;
        fiber *f0 = &p->f[base + first];
        unsigned mask = f0->call.mask;
        for (int l = 0; l < 32; l++) {
            int in = (mask >> l) & 1u;
            if (l >= lanes) {
                if (in)
                    block_fatal(p, base + first, "%s with mask 0x%08x names lane %d, which does not exist (the block has %d threads)",
                                f0->call.name, mask, l, p->n);
                continue;
            }
            fiber *f = &p->f[base + l];
            if (f->state == ST_WARP) {
                const warp_call &c = f->call;
                if (!in) block_fatal(p, base + l, "%s with mask 0x%08x, which leaves out the calling lane %d", c.name, c.mask, l);
                if (c.mask != mask || c.kind != f0->call.kind)
                    block_fatal(p, base + l, "%s with mask 0x%08x while lane %d called %s with mask 0x%08x", c.name, c.mask,
                                first, f0->call.name, mask);
            } else if (in) {
                block_fatal(p, base + first, "%s with mask 0x%08x, but lane %d (thread %d) never calls it: it %s", f0->call.name,
                            mask, l, base + l, state_name(f->state));
            }
        }
        /* every lane of the mask is here: exchange */
        uint64_t ballot = 0;
        for (int l = 0; l < lanes; l++)
            if ((mask >> l) & 1u) ballot |= (p->f[base + l].call.val ? 1ull : 0ull) << l;
        for (int l = 0; l < lanes; l++) {
            if (!((mask >> l) & 1u)) continue;
            fiber *f = &p->f[base + l];
            const warp_call &c = f->call;
            int wd = c.width, seg = l & ~(wd - 1), src = l;
            switch (c.kind) {
            case SHFL_IDX: src = seg + (c.arg & (wd - 1)); break;
            case SHFL_UP: src = (l - seg) >= c.arg ? l - c.arg : l; break;
            case SHFL_DOWN: src = (l - seg) + c.arg < wd ? l + c.arg : l; break;
            case SHFL_XOR: src = (l ^ c.arg) < seg + wd && (l ^ c.arg) >= seg ? (l ^ c.arg) : l; break;
            default: break;
            }
            if (c.kind == SHFL_BALLOT) f->result = ballot;
            else if (c.kind == SHFL_SYNCWARP || c.kind == SHFL_COLLECTIVE) f->result = 0;
            else {
                if (src >= lanes || !((mask >> src) & 1u))
                    block_fatal(p, base + l, "%s reads lane %d, which is not in the mask 0x%08x", c.name, src, mask);
                f->result = p->f[base + src].call.val;
            }
        }
        for (int l = 0; l < lanes; l++)
            if ((mask >> l) & 1u) {
                p->f[base + l].state = ST_RUN;
                p->nwarp--;
            }
#ifdef CUDAEMU_RACECHECK
        race_warp_sync(p, base, mask);
#endif
        done++;
    }
    return done;
}

/* splitmix64's finaliser: the schedule's random numbers. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The order the fibers run in during barrier phase `phase`: a permutation
 * drawn from the block's schedule, so that over launches and phases every
 * pair of threads runs in both orders. */
static void phase_order(pool *p, uint64_t phase)
{
    uint64_t s = mix64(p->sched ^ mix64(phase + 1));
    for (int i = 0; i < p->n; i++) p->order[i] = (uint16_t)i;
    for (int i = p->n - 1; i > 0; i--) {
        s = mix64(s);
        int j = (int)(s % (uint64_t)(i + 1));
        uint16_t t = p->order[i];
        p->order[i] = p->order[j];
        p->order[j] = t;
    }
}

static void run_block(pool *p)
{
    if (p->shared_bytes) memset(p->dyn, CUDAEMU_FILL, p->shared_bytes);
    for (int i = 0; i < p->n; i++) fiber_start(p, i);
    p->nbar = p->nwarp = p->ndone = 0;
    uint64_t phase = 0;
    phase_order(p, phase);
    for (;;) {
        for (int k = 0; k < p->n; k++) {
            fiber *f = &p->f[p->order[k]];
            if (f->state == ST_RUN) run_fiber(p, f);
        }
        if (p->nwarp) {
            if (resolve_warps(p)) continue;
            block_fatal(p, 0, "internal: a warp intrinsic left waiting"); /* resolve_warps stops on what it cannot complete */
        }
        if (p->ndone == p->n) return;
        if (p->ndone) {
            int first_bar = 0, first_done = 0;
            while (p->f[first_bar].state != ST_BAR) first_bar++;
            while (p->f[first_done].state != ST_DONE) first_done++;
            block_fatal(p, first_bar,
                        "__syncthreads() that not every thread of the block reaches: thread %d (%u,%u,%u) has returned "
                        "(%d of %d threads wait at the barrier)",
                        first_done, p->f[first_done].et.tid.x, p->f[first_done].et.tid.y, p->f[first_done].et.tid.z,
                        p->nbar, p->n);
        }
        for (int i = 0; i < p->n; i++) p->f[i].state = ST_RUN; /* every thread is at the barrier */
        p->nbar = 0;
#ifdef CUDAEMU_RACECHECK
        race_barrier(p);
#endif
        phase_order(p, ++phase);
    }
}

int cudaemu::launch_ok(const char *kernel, dim3 g, dim3 b, size_t shared, cudaStream_t stream)
{
    (void)kernel;
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (!cudaemu_valid_stream(stream)) {
        cudaemu_set_last_error(cudaErrorInvalidResourceHandle);
        return 0;
    }
    if (!g.x || !g.y || !g.z || !nt || nt > MAX_THREADS || b.x > 1024 || b.y > 1024 || b.z > 64 || g.x > 2147483647u ||
        g.y > 65535 || g.z > 65535 || shared > DYN_SHARED_MAX) {
        cudaemu_set_last_error(cudaErrorInvalidConfiguration);
        return 0;
    }
    return 1;
}

/* The text of argument i in the launch's argument list. */
void cudaemu::arg_text(const char *argtext, int i, char *out, size_t cap)
{
    int depth = 0, k = 0;
    const char *s = argtext, *start = argtext;
    for (;; s++) {
        if (*s == '(' || *s == '[' || *s == '{') depth++;
        else if (*s == ')' || *s == ']' || *s == '}') depth--;
        if ((*s == ',' && depth == 0) || !*s) {
            if (k == i) {
                while (start < s && *start == ' ') start++;
                snprintf(out, cap, "%.*s", (int)(s - start), start);
                return;
            }
            k++;
            start = s + 1;
        }
        if (!*s) break;
    }
    snprintf(out, cap, "?");
}

void cudaemu::check_arg(const char *kernel, const char *argtext, int i, const void *p)
{
    if (cudaemu_is_device(p)) return;
    char who[256], what[256];
    snprintf(who, sizeof who, "kernel %s", kernel);
    char a[160];
    arg_text(argtext, i, a, sizeof a);
    snprintf(what, sizeof what, "argument %d (%s)", i + 1, a);
    cudaemu_check_device(p, 0, who, what); /* stops, saying what p is */
}

/* ------------------------------------------------------------------------
 * Tables of tensors in device memory (CUDAEMU_ANNOTATE_TABLE): declared
 * for the next launch on this thread, checked and taken by it. */

namespace {
struct table_decl {
    const void *tab;
    int count;
    size_t stride, ptr_off, n_off, elem;
    const char *field;
};
thread_local std::vector<table_decl> t_decls;
thread_local std::vector<table_tensor> t_tables;
} // namespace

extern "C" void cudaemu_annotate_table(const void *tab, int count, size_t stride, size_t ptr_off, size_t n_off,
                                       size_t elem, const char *field)
{
    t_decls.push_back(table_decl{tab, count, stride, ptr_off, n_off, elem, field});
}

/* Entry e of table d (argument i): its extent, which must lie inside the
 * tensor its pointer points into. */
static void take_entry(const char *kernel, const char *argtext, int i, const table_decl &d, int e)
{
    const char *ent = (const char *)d.tab + (size_t)e * d.stride;
    const char *ptr;
    int64_t n;
    memcpy(&ptr, ent + d.ptr_off, sizeof ptr);
    memcpy(&n, ent + d.n_off, sizeof n);
    if (!ptr || n <= 0) return; /* nothing the kernel touches */
    char who[256], what[512], a[160];
    arg_text(argtext, i, a, sizeof a);
    snprintf(who, sizeof who, "kernel %s", kernel);
    snprintf(what, sizeof what, "argument %d (%s), entry %d's %s (%lld elements of %zu bytes)", i + 1, a, e, d.field,
             (long long)n, d.elem);
    table_tensor t;
    size_t bytes = (size_t)n * d.elem;
    if (!cudaemu_tensor_of(ptr, &t.lo, &t.hi, t.name, sizeof t.name)) {
        cudaemu_check_device(ptr, bytes, who, what); /* stops, saying what ptr is */
        return;
    }
    if ((uintptr_t)ptr + bytes > t.hi)
        cudaemu_fatal("%s: %s reaches %zu bytes past the end of %s%s%s of %zu bytes at %p", who, what,
                      (size_t)((uintptr_t)ptr + bytes - t.hi), t.name[0] ? "tensor \"" : "its allocation", t.name,
                      t.name[0] ? "\"" : "", (size_t)(t.hi - t.lo), (void *)t.lo);
    t.lo = (uintptr_t)ptr;
    t.hi = (uintptr_t)ptr + bytes;
    t.arg = i;
    t.entry = e;
    t.field = d.field;
    t_tables.push_back(t);
}

void cudaemu::take_tables(const char *kernel, const char *argtext, const void *const *ptrs, int nargs)
{
    t_tables.clear();
    std::vector<table_decl> decls;
    decls.swap(t_decls);
    for (const table_decl &d : decls) {
        int i = 0;
        while (i < nargs && ptrs[i] != d.tab) i++;
        if (i == nargs)
            cudaemu_fatal("kernel %s: CUDAEMU_ANNOTATE_TABLE declared a table of %s at %p for this launch, and no "
                          "argument of the kernel is that table",
                          kernel, d.field, d.tab);
        char who[256], what[256], a[160];
        arg_text(argtext, i, a, sizeof a);
        snprintf(who, sizeof who, "kernel %s", kernel);
        snprintf(what, sizeof what, "argument %d (%s), a table of %d entries of %zu bytes", i + 1, a, d.count, d.stride);
        if (d.count > 0) cudaemu_check_device(d.tab, (size_t)d.count * d.stride, who, what);
        for (int e = 0; e < d.count; e++) take_entry(kernel, argtext, i, d, e);
    }
}

const std::vector<table_tensor> &cudaemu::launch_tables(void)
{
    return t_tables;
}

extern "C" int cudaemu_guard_damage(const void **base, size_t *bytes); /* cudaemu_mem.cc */

/* CUDAEMU_PROFILE=1: per kernel, the launches, threads and seconds, on
 * stderr at exit (where the emulator's time goes; nothing about a GPU's). */
namespace {
struct prof_rec {
    const char *kernel;
    long long launches, threads;
    double seconds;
};
prof_rec prof[256];
int nprof = -1;

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void prof_print(void)
{
    std::sort(prof, prof + nprof, [](const prof_rec &a, const prof_rec &b) { return a.seconds > b.seconds; });
    fprintf(stderr, "cudaemu profile: kernel, launches, threads, seconds\n");
    for (int i = 0; i < nprof; i++)
        fprintf(stderr, "  %-40s %8lld %14lld %9.3f\n", prof[i].kernel, prof[i].launches, prof[i].threads,
                prof[i].seconds);
}

void prof_add(const char *kernel, long long threads, double s)
{
    if (nprof < 0) {
        const char *e = getenv("CUDAEMU_PROFILE");
        nprof = 0;
        if (!e || strcmp(e, "1")) nprof = -2;
        else atexit(prof_print);
    }
    if (nprof == -2) return;
    int i = 0;
    while (i < nprof && strcmp(prof[i].kernel, kernel)) i++;
    if (i == nprof) {
        if (nprof == 256) return;
        prof[nprof++] = prof_rec{kernel, 0, 0, 0};
    }
    prof[i].launches++;
    prof[i].threads += threads;
    prof[i].seconds += s;
}
} // namespace

/* CUDAEMU_SEED (a number; 1 when unset): the seed of every launch's
 * schedule, mixed with the launch's number. The same seed gives the same
 * schedules, so a run that failed replays. */
static void seed_init(void)
{
    static int done;
    if (done) return;
    done = 1;
    const char *e = getenv("CUDAEMU_SEED");
    char *end = NULL;
    base_seed = 1;
    if (e && *e) {
        base_seed = strtoull(e, &end, 0);
        if (*end) cudaemu_fatal("CUDAEMU_SEED=%s: not a number", e);
    }
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void cudaemu::run_grid(const char *kernel, const char *argtext, body_fn fn, void *closure, dim3 grid, dim3 block,
                       size_t shared, const void *const *ptrs, int nargs)
{
    long long nblocks = (long long)grid.x * grid.y * grid.z;
    int n = (int)(block.x * block.y * block.z);
    double t0 = now_s();
    seed_init();
    uint64_t lseed = mix64(base_seed ^ mix64(++launch_no));
    /* The blocks' order: block k runs as (first + k * stride) mod nblocks,
     * stride prime to nblocks, both drawn from the launch's seed. */
    uint64_t nb = (uint64_t)nblocks, first = mix64(lseed ^ 1) % nb, stride = 1;
    if (nb > 2) {
        stride = 1 + mix64(lseed ^ 2) % (nb - 1);
        while (gcd64(stride, nb) != 1) stride = stride % (nb - 1) + 1;
    }
#ifdef CUDAEMU_RACECHECK
    race_launch_begin(kernel, argtext, ptrs, nargs);
#endif
#pragma omp parallel for schedule(dynamic, 16)
    for (long long k = 0; k < nblocks; k++) {
        long long bi = (long long)((first + (unsigned __int128)stride * (uint64_t)k % nb) % nb);
        pool *p = get_pool();
        p->kernel = kernel;
        p->fn = fn;
        p->closure = closure;
        p->n = n;
        p->shared_bytes = shared;
        p->blk.bdim = block;
        p->blk.gdim = grid;
        p->blk.bidx.x = (unsigned)(bi % grid.x);
        p->blk.bidx.y = (unsigned)((bi / grid.x) % grid.y);
        p->blk.bidx.z = (unsigned)(bi / ((long long)grid.x * grid.y));
        p->sched = mix64(lseed ^ (uint64_t)bi);
        if (p->tid_dims.x != block.x || p->tid_dims.y != block.y || p->tid_dims.z != block.z) {
            for (int i = 0; i < n; i++) {
                ethread *t = &p->f[i].et;
                t->blk = &p->blk;
                t->tid.x = (unsigned)(i % block.x);
                t->tid.y = (unsigned)((i / block.x) % block.y);
                t->tid.z = (unsigned)(i / (block.x * block.y));
            }
            p->tid_dims = block;
        }
#ifdef CUDAEMU_RACECHECK
        race_block_begin(p, (uint32_t)bi);
#endif
        run_block(p);
#ifdef CUDAEMU_RACECHECK
        race_block_end(p);
#endif
    }
#ifdef CUDAEMU_RACECHECK
    race_launch_end();
#endif
    prof_add(kernel, nblocks * n, now_s() - t0);
    const void *base = NULL;
    size_t bytes = 0;
    if (cudaemu_guard_damage(&base, &bytes)) {
        char args[512] = "";
        size_t used = 0;
        for (int i = 0; i < nargs; i++) {
            const char *q = (const char *)ptrs[i];
            if (q && q >= (const char *)base && q < (const char *)base + bytes) {
                char a[160];
                arg_text(argtext, i, a, sizeof a);
                used += (size_t)snprintf(args + used, used < sizeof args ? sizeof args - used : 0, "%sargument %d (%s)",
                                         used ? ", " : "", i + 1, a);
            }
        }
        cudaemu_fatal("kernel %s wrote outside the device allocation of %zu bytes at %p (a guard zone was "
                      "overwritten)%s%s",
                      kernel, bytes, base, used ? "; it was passed as " : "", args);
    }
}
