/* cudaemu's WMMA collectives (include/mma.h): the meeting of a warp's
 * lanes in load_matrix_sync, store_matrix_sync and mma_sync.
 *
 * A lane writes its slot (the operation, pointer, leading dimension,
 * layout, or its fragments) into a table that the running block's threads
 * share, and enters a warp intrinsic of the execution model with the full
 * mask (SHFL_WMMA): the scheduler completes it only when all 32 lanes are
 * in one, and stops the run, naming the kernel, the block and the lane,
 * when a lane has returned, waits at a barrier or in another intrinsic.
 * Past it, every lane checks that the warp agrees (same operation, same
 * arguments) and reads what it needs; a second meeting (wmma_end) keeps
 * every slot intact until all lanes are done reading, since a lane that
 * runs on would otherwise overwrite its slot for its next call while
 * another lane still reads it.
 *
 * The fibers of a block run on one OS thread, so the table is that
 * thread's (thread_local), one slot per thread of the block. */
#include "mma.h"

#include "cudaemu.h"

#include <stdint.h>

namespace cudaemu {

static thread_local wmma_slot t_slots[1024];

static int linear_tid(void)
{
    ethread *t = t_cur;
    if (!t) cudaemu_fatal("a WMMA call outside a kernel");
    const dim3 &b = t->blk->bdim;
    return (int)(t->tid.x + t->tid.y * b.x + t->tid.z * b.x * b.y);
}

int wmma_lane(void)
{
    return linear_tid() % 32;
}

static const char *op_name(int op)
{
    switch (op) {
    case WMMA_LOAD_A: return "wmma::load_matrix_sync(matrix_a)";
    case WMMA_LOAD_B: return "wmma::load_matrix_sync(matrix_b)";
    case WMMA_LOAD_C: return "wmma::load_matrix_sync(accumulator)";
    case WMMA_STORE_C: return "wmma::store_matrix_sync";
    default: return "wmma::mma_sync";
    }
}

/* CUDA's requirements on a tile in memory, and the tile inside its
 * allocation when it is device memory. */
static void check_tile(const wmma_slot &s, const char *name)
{
    if ((uintptr_t)s.ptr % 32)
        cudaemu_fatal("%s: the pointer %p is not 32-byte (256-bit) aligned, as WMMA requires", name, s.ptr);
    if (((size_t)s.ldm * s.esz) % 16)
        cudaemu_fatal("%s: leading dimension %u (%zu bytes) is not a multiple of 16 bytes, as WMMA requires", name,
                      s.ldm, (size_t)s.ldm * s.esz);
    if (s.ldm < 16) cudaemu_fatal("%s: leading dimension %u is less than the tile's 16", name, s.ldm);
    if (cudaemu_is_device(s.ptr)) cudaemu_check_device(s.ptr, ((size_t)15 * s.ldm + 16) * s.esz, name, "the tile");
}

const wmma_slot *wmma_begin(const wmma_slot &mine, const char *name)
{
    int tid = linear_tid(), lane = tid % 32, base = tid - lane;
    t_slots[tid] = mine;
    warp_op(SHFL_WMMA, 0xffffffffu, 0, mine.op, 32, name);
    const wmma_slot *w = &t_slots[base];
    for (int l = 0; l < 32; l++) {
        const wmma_slot &o = w[l];
        if (o.op != mine.op)
            cudaemu_fatal("%s in lane %d while lane %d calls %s: the warp's lanes must make the same WMMA call", name,
                          lane, l, op_name(o.op));
        if (mine.op != WMMA_MMA && (o.ptr != mine.ptr || o.ldm != mine.ldm || o.layout != mine.layout))
            cudaemu_fatal("%s: lane %d passes (%p, ldm %u, %s) but lane %d (%p, ldm %u, %s): the arguments must be "
                          "the same in every lane",
                          name, lane, mine.ptr, mine.ldm, mine.layout ? "col-major" : "row-major", l, o.ptr, o.ldm,
                          o.layout ? "col-major" : "row-major");
    }
    if (mine.op != WMMA_MMA) check_tile(mine, name);
    return w;
}

void wmma_end(const char *name)
{
    warp_op(SHFL_WMMA, 0xffffffffu, 0, -1, 32, name);
}

} // namespace cudaemu
