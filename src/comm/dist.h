/* Data-parallel communication between the processes of one job.
 *
 * A job is started by a launcher (`mpirun -np N bertc train ...`, `srun`):
 * dist_init reads from the environment whether it was (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_SIZE, SLURM_PROCID with SLURM_STEP_NUM_TASKS) and only then
 * calls MPI_Init, so a plain `bertc train` never needs MPI at run time. A
 * build without MPI (BERTC_HAVE_MPI undefined) runs as one process and
 * refuses a launch of more than one with ERR_INPUT.
 *
 * Every collective below must be called by every rank in the same order.
 * Reductions have a fixed summation order: dist_allreduce_sum_fixed is
 * dist_reduce_scatter_sum_fixed, in which the owner of each piece adds the N
 * contributions in rank order 0, 1, .., N-1 (moving raw bytes with
 * MPI_Alltoallv, never MPI_SUM, whose order the library picks), then
 * dist_allgather, so every rank ends with the same bytes and two runs with
 * the same N are bit-identical. The sum of each float is the same whoever
 * owns it, so the pieces (piece_of) change no result. The sharded
 * optimizer (--shard-optimizer) uses the two halves apart: each rank updates
 * the parameters of its pieces between them.
 *
 * Errors: functions return 0 or an err.h code with the message set; a rank
 * whose peers died is ended by the launcher (mpirun) with SIGTERM/SIGKILL. */
#ifndef BERTC_COMM_DIST_H
#define BERTC_COMM_DIST_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this build has MPI. */
int dist_have_mpi(void);
/* Ranks the launcher says this job has (1 without a launcher), from the
 * environment alone; *rank gets this process's rank. */
int dist_launch_size(int *rank);
/* 1 when started by a launcher (mpirun, srun), whatever the rank count. */
int dist_launched(void);
/* Starts the communication when launched with a launcher (MPI_Init,
 * errors returned, not aborting); a no-op otherwise. ERR_INPUT when launched
 * with N > 1 ranks in a build without MPI. */
int dist_init(int *argc, char ***argv);
/* MPI_Finalize when dist_init started MPI. */
void dist_finalize(void);
/* The end of a job (cmd_train's last step): with more than one rank,
 * dist_agree on rc, the failing rank's one line printed by every rank
 * (control characters as '?') and a barrier; then dist_finalize. Returns
 * the code to exit with. */
int dist_end(int rc);
int dist_rank(void);
/* This rank's index among the ranks on its machine, from the launcher's
 * environment (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID);
 * 0 without one. A GPU run uses CUDA device --gpu + local rank. */
int dist_local_rank(void);
int dist_size(void);
/* 1 while more than one rank runs. */
int dist_active(void);

/* The pieces of the reduce-scatter and the gathers below: core/piece.h's
 * piece_of. */
/* In place: x[i] = sum over ranks r = 0..N-1, in that order, of x_r[i];
 * every rank ends with the same bytes. Block sizes up to INT_MAX floats
 * (MPI's counts), as the two below. */
int dist_allreduce_sum_fixed(float *x, size_t n);
/* In place: this rank's piece of x (piece_of) gets the sum over ranks in
 * rank order, the same bytes dist_allreduce_sum_fixed gives there; the
 * rest of x is left as it was. */
int dist_reduce_scatter_sum_fixed(float *x, size_t n);
/* In place: every rank's piece of x to every rank. */
int dist_allgather(float *x, size_t n);
/* Rank root's x (n floats) gets every rank's piece: x[piece of r] = rank
 * r's `mine` (its piece's floats; on root it may point at its own piece of
 * x). x is written on root only and may be NULL elsewhere. */
int dist_gather_pieces(const float *mine, float *x, size_t n, int root);
/* The same for a few doubles (losses, counts). */
int dist_allreduce_sum_f64(double *x, int n);
/* rank root's bytes to every rank. */
int dist_bcast(void *buf, size_t bytes, int root);
int dist_barrier(void);
/* Everyone's rc: 0 on every rank when all were 0; else the code of the
 * lowest failing rank, with its message ("rank R: ...") set on every rank,
 * so every rank ends with the same one line. */
int dist_agree(int rc);
/* Compares h (a hash of this rank's binary and arguments) with rank 0's:
 * ERR_INPUT on every rank naming the first rank that differs. */
int dist_check_hash(uint64_t h, const char *what);
/* FNV-1a 64 of bytes, chained from h (start with DIST_HASH_INIT). */
#define DIST_HASH_INIT 0xcbf29ce484222325ull
uint64_t dist_hash(uint64_t h, const void *p, size_t n);
/* The hash of argv[0..argc) (the arguments, not the environment). */
uint64_t dist_hash_invocation(int argc, char **argv);
/* The hash of this process's executable (/proc/self/exe); 0 when unreadable. */
uint64_t dist_hash_binary(void);
/* Ends the whole job: prints "bertc: rank R of N: MSG" and MPI_Abort (exit
 * with code in a one-process run). */
void dist_abort(int code, const char *msg);
/* Seconds this process spent inside dist collectives (communication and
 * waiting for slower ranks). */
double dist_comm_seconds(void);

/* The fixed share of one step's examples for rank r of n: the step's
 * `count` examples in units of `micro` (the last unit may be short) are
 * dealt out contiguously, rank r getting units [r*U/n, (r+1)*U/n) where
 * U = ceil(count/micro). *first: the rank's first example (an index into
 * the step's list, so a multiple of micro), *len: how many (0 possible when
 * U < n). A pure function of (count, micro, n, r). */
void dist_share(int count, int micro, int n, int r, int *first, int *len);

#endif
