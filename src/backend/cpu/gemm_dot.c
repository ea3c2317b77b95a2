/* The word-dot-product driver of gemm_int8 and gemm_bf16 (see gemm_dot.h).
 *
 * All rows of the input are packed first (each MR-row panel by one thread),
 * then the output is cut into tasks of up to ROWP row panels by a run of
 * column panels, handed to threads dynamically. Inside a task the column
 * panel is the outer loop, so its K words (12 KiB per 384 of K in int8,
 * 24 KiB of bf16) stay in L1/L2 while the task's row panels pass under them.
 * Where the tiles run changes none of their arithmetic (gemm_dot.h). */
#include "backend/cpu/gemm_dot.h"

#include "backend/cpu/gemm_ws.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Row panels per task: 96 rows, whose packed words (96 x K bytes of int8,
 * twice that of bf16) stay in L2 while the task's column panels go by. */
enum { ROWP = 8 };

int dot_weights_alloc(struct dot_weights *w, int oc, int k, int k_per_word, const float *bias, int with_scales)
{
    memset(w, 0, sizeof *w);
    w->oc = oc;
    w->k = k;
    w->kg = ((k + k_per_word - 1) / k_per_word + 3) / 4 * 4;
    w->npan = (oc + DOT_NR - 1) / DOT_NR;
    size_t cols = (size_t)w->npan * DOT_NR;
    w->b = calloc(cols * (size_t)(w->kg > 0 ? w->kg : 1), sizeof *w->b);
    w->bias = calloc(cols, sizeof *w->bias);
    if (with_scales) {
        w->cs = calloc(cols, sizeof *w->cs);
        w->comp = calloc(cols, sizeof *w->comp);
    }
    if (!w->b || !w->bias || (with_scales && (!w->cs || !w->comp))) {
        dot_weights_free(w);
        return -1;
    }
    if (bias) memcpy(w->bias, bias, (size_t)oc * sizeof *bias);
    return 0;
}

void dot_weights_free(struct dot_weights *w)
{
    free(w->b);
    free(w->cs);
    free(w->bias);
    free(w->comp);
    memset(w, 0, sizeof *w);
}

size_t dot_weights_bytes(const struct dot_weights *w)
{
    size_t cols = (size_t)w->npan * DOT_NR;
    return cols * (size_t)w->kg * sizeof *w->b + cols * sizeof *w->bias +
           (w->cs ? cols * (sizeof *w->cs + sizeof *w->comp) : 0);
}

struct dot_run {
    const struct dot_kind *k;
    const struct dot_kern *kr;
    const struct dot_weights *w; /* the first product's (K, kg and the columns are all products') */
    const struct dot_weights *const *ws;
    float *const *outs;
    int N, nap; /* rows, row panels */
    int rb, cb; /* tasks per product: row blocks (ROWP panels) x column blocks */
    int cpt;    /* column panels per column block */
    const float *in;
    long ldin, ldout;
    uint32_t *ap; /* the packed rows: nap panels of kg * MR words */
    float *rs;    /* their scales, nap * MR (NULL: none) */
};

/* Row panel ip: each row by the kernel's packer, the rows past N as pad. */
static void pack_panel(const struct dot_run *r, int ip)
{
    int kg = r->w->kg, r0 = ip * DOT_MR;
    uint32_t *a = r->ap + (size_t)ip * kg * DOT_MR;
    for (int i = 0; i < DOT_MR; i++) {
        float *rs = r->rs ? r->rs + r0 + i : NULL;
        if (r0 + i < r->N) {
            r->kr->pack(a + 4 * i, rs, r->in + (size_t)(r0 + i) * r->ldin, r->w->k, kg);
            continue;
        }
        for (int g = 0; g < kg; g++) a[dot_a_index(g) + 4 * (size_t)i] = r->k->pad_word;
        if (rs) *rs = 0.0f;
    }
}

/* Task t of product t / (rb cb): row panels of block t' / cb by column
 * panels of block t' % cb (t' = t mod rb cb). Tiles that stick out of the
 * output go through scratch (MR x NR floats). */
static void run_task(const struct dot_run *r, int t, float *scratch)
{
    int per = r->rb * r->cb;
    const struct dot_weights *w = r->ws[t / per];
    float *out = r->outs[t / per];
    t %= per;
    int ip0 = t / r->cb * ROWP, ip1 = ip0 + ROWP < r->nap ? ip0 + ROWP : r->nap;
    int jp0 = t % r->cb * r->cpt, jp1 = jp0 + r->cpt < w->npan ? jp0 + r->cpt : w->npan;
    for (int jp = jp0; jp < jp1; jp++) {
        const uint32_t *bp = w->b + (size_t)jp * w->kg * DOT_NR;
        int c0 = jp * DOT_NR, cols = w->oc - c0 < DOT_NR ? w->oc - c0 : DOT_NR;
        struct dot_epi e = {NULL, w->cs ? w->cs + c0 : NULL, w->bias + c0, w->comp ? w->comp + c0 : NULL};
        for (int ip = ip0; ip < ip1; ip++) {
            const uint32_t *apan = r->ap + (size_t)ip * w->kg * DOT_MR;
            int r0 = ip * DOT_MR, rows = r->N - r0 < DOT_MR ? r->N - r0 : DOT_MR;
            float *o = out + (size_t)r0 * r->ldout + c0;
            e.rs = r->rs ? r->rs + r0 : NULL;
            if (rows == DOT_MR && cols == DOT_NR) {
                r->kr->tile(w->kg, apan, bp, o, r->ldout, &e);
                continue;
            }
            r->kr->tile(w->kg, apan, bp, scratch, DOT_NR, &e);
            for (int i = 0; i < rows; i++)
                memcpy(o + (size_t)i * r->ldout, scratch + i * DOT_NR, (size_t)cols * sizeof(float));
        }
    }
}

/* Column blocks: enough tasks for the threads to share evenly (4 per
 * thread), but never a block of less than one panel. */
static void plan(struct dot_run *r, int nthr)
{
    r->nap = (r->N + DOT_MR - 1) / DOT_MR;
    r->rb = (r->nap + ROWP - 1) / ROWP;
    int cb = 1;
    while (nthr > 1 && r->rb * cb < 4 * nthr && cb < r->w->npan) cb++;
    r->cpt = (r->w->npan + cb - 1) / cb;
    r->cb = (r->w->npan + r->cpt - 1) / r->cpt;
}

int dot_gemm_n(const struct dot_kind *k, const struct dot_kern *kr, const struct dot_weights *const *w, int nw, int N,
               const float *in, long ldin, float *const *out, long ldout, int nthreads)
{
    if (N <= 0 || nw <= 0 || w[0]->oc <= 0) return 0;
    int with_rs = k->with_scales;
    struct dot_run r = {k, kr, w[0], w, out, N, 0, 0, 0, 0, in, ldin, ldout, NULL, NULL};
    /* Below this many multiply-adds a parallel region costs more than it saves. */
    int nthr = nthreads > 1 && (double)N * w[0]->oc * w[0]->k * nw >= 1 << 18 ? nthreads : 1;
    plan(&r, nthr);
    int ntask = r.rb * r.cb * nw;
    if (nthr > ntask) nthr = ntask;
    size_t a_bytes = ((size_t)r.nap * w[0]->kg * DOT_MR * sizeof(uint32_t) + 63) & ~(size_t)63;
    size_t rs_bytes = with_rs ? ((size_t)r.nap * DOT_MR * sizeof(float) + 63) & ~(size_t)63 : 0;
    size_t sc_bytes = DOT_MR * DOT_NR * sizeof(float);
    char *mem = gemm_ws_get(a_bytes + rs_bytes + (size_t)nthr * sc_bytes);
    if (!mem) return -1;
    r.ap = (uint32_t *)mem;
    r.rs = with_rs ? (float *)(mem + a_bytes) : NULL;
    char *scratch = mem + a_bytes + rs_bytes;
    if (nthr == 1) {
        for (int ip = 0; ip < r.nap; ip++) pack_panel(&r, ip);
        for (int t = 0; t < ntask; t++) run_task(&r, t, (float *)scratch);
        return 0;
    }
#pragma omp parallel num_threads(nthr)
    {
        float *sc = (float *)(scratch + (size_t)omp_get_thread_num() * sc_bytes);
#pragma omp for schedule(static)
        for (int ip = 0; ip < r.nap; ip++) pack_panel(&r, ip);
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++) run_task(&r, t, sc);
    }
    return 0;
}

int dot_gemm(const struct dot_kind *k, const struct dot_kern *kr, const struct dot_weights *w, int N, const float *in,
             long ldin, float *out, long ldout, int nthreads)
{
    return dot_gemm_n(k, kr, &w, 1, N, in, ldin, &out, ldout, nthreads);
}
