/* cudaemu's execution model, inside: a block's fibers and the OS thread's
 * pool that runs them (cudaemu_exec.cc), shared with the race detector
 * (cudaemu_race.cc), which reads the running block's state. */
#ifndef CUDAEMU_EXEC_INTERNAL_H
#define CUDAEMU_EXEC_INTERNAL_H

#include "cuda_runtime.h"

#include <vector>

namespace cudaemu {

enum { ST_RUN, ST_BAR, ST_WARP, ST_DONE };

#define MAX_THREADS 1024
#define STACK_BYTES (16 * 1024)
#define STACK_STRIDE (STACK_BYTES + 4096) /* the stack and the guard page below it */
#define DYN_SHARED_MAX (48 * 1024)

/* A warp intrinsic as a lane called it. */
struct warp_call {
    shfl_kind kind;
    const char *name;
    unsigned mask;
    int arg, width;
    uint64_t val; /* the lane's value (a shuffle's source, a ballot's predicate) */
};

struct fiber {
    ethread et;
    int state;
    void *sp;       /* its stack pointer while it waits */
    warp_call call; /* the warp intrinsic it waits in */
    uint64_t result;
};

struct pool {
    fiber f[MAX_THREADS];
    char *stacks; /* MAX_THREADS of STACK_STRIDE bytes */
    block_state blk;
    const char *kernel;
    body_fn fn;
    void *closure;
    void *sched_sp;
    int n;
    int nbar, nwarp, ndone;   /* how many fibers wait at a barrier, in a warp intrinsic, have returned */
    unsigned char warp_waiting[MAX_THREADS / 32]; /* warps with a lane in a warp intrinsic */
    dim3 tid_dims;            /* the block shape the fibers' thread indices were computed for */
    size_t shared_bytes;
    uint64_t sched;           /* the block's schedule: the launch's seed mixed with the block index */
    uint16_t order[MAX_THREADS]; /* the fibers' order in the current phase */
    alignas(16) unsigned char dyn[DYN_SHARED_MAX];
#ifdef CUDAEMU_RACECHECK
    /* The race detector's view of the block: its linear index in the grid,
     * a number no other block run shares, the barrier phase, and each
     * thread's vector clock over the lanes of its warp (what the warp's
     * collective calls since the last barrier order: a lane's own entry
     * counts its calls). */
    uint32_t rc_block;
    uint64_t rc_serial;
    uint32_t rc_phase;
    uint16_t rc_vc[MAX_THREADS][32];
#endif
};

extern __thread pool *t_pool;

/* The text of argument i of a launch's argument list (its source text,
 * CUDAEMU_LAUNCH's #__VA_ARGS__). */
void arg_text(const char *argtext, int i, char *out, size_t cap);

/* A tensor the running launch reaches through a table argument
 * (CUDAEMU_ANNOTATE_TABLE): the entry's extent [lo, hi), the argument, the
 * entry, its field, and the name of the tensor it lies in ("" for a whole
 * allocation). */
struct table_tensor {
    uintptr_t lo, hi;
    int arg, entry;
    const char *field;
    char name[96];
};
/* Those of the launch on this thread (take_tables). */
const std::vector<table_tensor> &launch_tables(void);

/* The launch counter and the schedule's seed of the running launch
 * (CUDAEMU_SEED, mixed with the launch's number). */
extern unsigned long long launch_no;
extern uint64_t base_seed;

#ifdef CUDAEMU_RACECHECK
/* cudaemu_race.cc: called by the scheduler. */
void race_launch_begin(const char *kernel, const char *argtext, const void *const *ptrs, int nargs);
void race_launch_end(void);
void race_block_begin(pool *p, uint32_t block);
void race_block_end(pool *p);
void race_barrier(pool *p);
void race_warp_sync(pool *p, int base, unsigned mask);
#endif

} // namespace cudaemu

#endif
