/* The pipeline's split and 1F1B schedule (pipeline.h). */
#include "train/pipeline.h"

#include "core/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pipe_sets(int S, int s, int M)
{
    int n = S - s;
    return n < M ? n : M;
}

pipe_op pipe_op_at(int S, int s, int M, int i)
{
    int warm = S - s - 1 < M ? S - s - 1 : M;
    int sets = pipe_sets(S, s, M);
    pipe_op op;
    if (i < warm) {
        op.kind = PIPE_FORWARD;
        op.micro = i;
    } else if (i < warm + 2 * (M - warm)) {
        /* steady: forward warm + j, then backward j */
        int j = (i - warm) / 2;
        op.kind = (i - warm) % 2 ? PIPE_BACKWARD : PIPE_FORWARD;
        op.micro = op.kind == PIPE_FORWARD ? warm + j : j;
    } else {
        op.kind = PIPE_BACKWARD;
        op.micro = i - warm - (M - warm); /* the cool-down: backwards M - warm .. M - 1 */
    }
    op.set = op.micro % (sets > 0 ? sets : 1);
    return op;
}

void pipe_split_even(int L, int S, int *split)
{
    for (int s = 0; s <= S; s++) split[s] = (int)((long long)s * L / S);
}

int pipe_split_check(const int *split, int S, int L, const char *opt)
{
    if (S > L)
        return err_set(ERR_INPUT, "%s: %d stages but the model has %d encoder layers (every stage needs one at least)",
                       opt, S, L);
    if (split[0] != 0 || split[S] != L)
        return err_set(ERR_INPUT, "%s: the boundaries must run from 0 to the model's %d layers (got %d .. %d)", opt, L,
                       split[0], split[S]);
    for (int s = 0; s < S; s++)
        if (split[s + 1] <= split[s])
            return err_set(ERR_INPUT, "%s: stage %d would hold no layer (boundaries %d, %d): they must increase", opt,
                           s, split[s], split[s + 1]);
    return 0;
}

int pipe_split_parse(const char *s, int *split, int max, int *n, const char *opt)
{
    *n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1 << 20 || (*end && *end != ','))
            return err_set(ERR_INPUT, "%s %s: expected layer boundaries like 0,6,12 (item %d is not a number)", opt, s,
                           *n + 1);
        if (*n >= max) return err_set(ERR_INPUT, "%s %s: more than %d boundaries", opt, s, max);
        split[(*n)++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    return 0;
}

int pipe_simulate(int S, int M, double tf, double tb, double *makespan, double *idle)
{
    if (S < 1 || M < 1 || S > PIPE_MAX_STAGES) return err_set(ERR_RUNTIME, "pipe_simulate: %d stages, %d micro-batches", S, M);
    /* done[kind][s][i]: when op (kind, i) of stage s finished (< 0: not yet) */
    double *done = malloc(2 * (size_t)S * (size_t)M * sizeof *done);
    int *next = calloc((size_t)S, sizeof *next);
    double *free_at = calloc((size_t)S, sizeof *free_at);
    if (!done || !next || !free_at) {
        free(done);
        free(next);
        free(free_at);
        return err_set(ERR_RUNTIME, "pipe_simulate: out of memory");
    }
#define DONE(k, s, i) done[((size_t)(k) * (size_t)S + (size_t)(s)) * (size_t)M + (size_t)(i)]
    for (size_t j = 0; j < 2 * (size_t)S * (size_t)M; j++) done[j] = -1;
    int left = 2 * S * M, rc = 0;
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < S; s++) {
            while (next[s] < 2 * M) {
                pipe_op op = pipe_op_at(S, s, M, next[s]);
                /* a forward needs the previous stage's, a backward the next stage's */
                double ready = 0;
                if (op.kind == PIPE_FORWARD && s > 0) ready = DONE(PIPE_FORWARD, s - 1, op.micro);
                if (op.kind == PIPE_BACKWARD && s < S - 1) ready = DONE(PIPE_BACKWARD, s + 1, op.micro);
                if (op.kind == PIPE_BACKWARD && DONE(PIPE_FORWARD, s, op.micro) < 0) ready = -1;
                if (ready < 0) break;
                double start = ready > free_at[s] ? ready : free_at[s];
                free_at[s] = start + (op.kind == PIPE_FORWARD ? tf : tb);
                DONE(op.kind, s, op.micro) = free_at[s];
                next[s]++;
                left--;
                progress = 1;
            }
        }
        if (!progress) {
            rc = err_set(ERR_RUNTIME, "pipe_simulate: the schedule of %d stages and %d micro-batches deadlocks", S, M);
            break;
        }
    }
#undef DONE
    if (!rc) {
        double end = 0;
        for (int s = 0; s < S; s++)
            if (free_at[s] > end) end = free_at[s];
        if (makespan) *makespan = end;
        for (int s = 0; idle && s < S; s++) idle[s] = end - (double)M * (tf + tb);
    }
    free(done);
    free(next);
    free(free_at);
    return rc;
}
