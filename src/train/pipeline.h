/* Pipeline model parallelism (`bertc train --pipeline-stages S`): the
 * arithmetic that every stage computes alike, as pure functions.
 *
 * Split: the L encoder layers in S contiguous stages, split[0] = 0 <
 * split[1] < ... < split[S] = L; stage s holds layers [split[s],
 * split[s+1]), the embeddings with stage 0, the QA head with stage S-1.
 *
 * Schedule: 1F1B (PipeDream-Flush). A step's M micro-batches go through
 * the stages in order; stage s first runs min(S - s - 1, M) forwards (the
 * warm-up), then alternates one forward and one backward until the
 * forwards are done, then runs the backwards left (the cool-down). The
 * backwards of every stage come in micro-batch order 0, 1, .., M-1, as a
 * single process runs them, so gradients accumulate in the same order.
 * Stage s has at most min(S - s, M) micro-batches in flight (forward done,
 * backward not): micro-batch i uses activation set i mod that number, which
 * is free by then. */
#ifndef BERTC_TRAIN_PIPELINE_H
#define BERTC_TRAIN_PIPELINE_H

#define PIPE_MAX_STAGES 64

typedef enum { PIPE_FORWARD = 0, PIPE_BACKWARD = 1 } pipe_kind;

typedef struct {
    pipe_kind kind;
    int micro; /* the micro-batch, 0 .. M-1 */
    int set;   /* its activation set on this stage */
} pipe_op;

/* Activation sets stage s of S needs for M micro-batches: min(S - s, M). */
int pipe_sets(int S, int s, int M);
/* Op i (0 .. 2M-1) of stage s's schedule. */
pipe_op pipe_op_at(int S, int s, int M, int i);

/* The even split: stage s gets layers [s L / S, (s+1) L / S) (floors),
 * so stage sizes differ by one layer at most. (bertc train's default is
 * memory_split's, model/memory.h: by FLOPs, then peak memory.) */
void pipe_split_even(int L, int S, int *split);
/* 0, or ERR_INPUT naming what is wrong with split[0..S] for L layers
 * (opt: the option's name for the message). */
int pipe_split_check(const int *split, int S, int L, const char *opt);
/* Parses "0,5,12" into split (up to max entries); *n gets the count.
 * ERR_INPUT naming the option and the bad item. */
int pipe_split_parse(const char *s, int *split, int max, int *n, const char *opt);

/* The schedule run with every forward taking tf and every backward tb
 * seconds and messages taking no time: *makespan, the step's length, and
 * idle[s], stage s's time waiting for a neighbour (or NULL). ERR_RUNTIME
 * when the schedule would deadlock (it does not: the test checks). The
 * step takes (M + S - 1)(tf + tb), so each stage's bubble, idle / step, is
 * (S - 1) / (M + S - 1). */
int pipe_simulate(int S, int M, double tf, double tb, double *makespan, double *idle);

#endif
