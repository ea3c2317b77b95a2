/* --mirror DIR: every checkpoint the trainer completes is copied, in the
 * background, to DIR/checkpoints/step-N (DIR is a mounted Google Drive, a
 * network disk: somewhere that outlives the machine), so that a fresh VM
 * can resume with --resume auto --mirror DIR (trainer: when the run dir has
 * no valid checkpoint, the newest valid one of DIR is used).
 *
 * Each copy is atomic there too: the files are written (and fsync'ed) to
 * DIR/checkpoints/step-N.tmp, renamed to step-N, and the copy is verified
 * against its MANIFEST (ckpt_verify: sizes and CRC32C), as is the source
 * before it; then DIR keeps the newest `keep` checkpoints (0: all).
 *
 * Never in the trainer's way: mirror_submit only records the checkpoint and
 * wakes the mirror's thread. The queue holds one: a checkpoint submitted
 * while a copy runs replaces any waiting one (the newest wins). A failed
 * copy is retried (backoff 1, 2, 4, 8 s; 5 tries) unless a newer
 * checkpoint is waiting; the first failure of a streak gives one warning,
 * the others go to RUN/mirror.log only. Every outcome is a line of
 * RUN/mirror.log ("unix_time step result detail") and the live status
 * (obs_set_mirror).
 *
 * Test hooks: BERTC_DEBUG_MIRROR_DELAY_MS=N sleeps N ms per file copied (a
 * slow disk); BERTC_DEBUG_MIRROR_BACKOFF_MS=N replaces the 1 s base of the
 * backoff; BERTC_DEBUG_MIRROR_FAIL=N makes the first N attempts fail. */
#ifndef BERTC_TRAIN_MIRROR_H
#define BERTC_TRAIN_MIRROR_H

#include "obs/obs.h"

#include <stdint.h>

typedef struct mirror mirror;

/* dir must exist (a mount point that is missing is not created);
 * DIR/checkpoints is created. ERR_RUNTIME naming the dir when it is missing
 * or not writable: the caller warns and trains on without a mirror. run_dir
 * gets mirror.log; obs may be NULL. */
int mirror_start(mirror **out, const char *dir, int keep, const char *run_dir, obs_run *obs);
/* Queues the complete checkpoint dir src (of step) for copying. */
void mirror_submit(mirror *m, const char *src, int64_t step);
/* Waits up to wait_s for the running and waiting copies, then stops the
 * thread. A copy still running then is left to finish while the process
 * ends (reported; the mirror keeps its older checkpoints, and the .tmp dir
 * of the unfinished one is removed by the next copy). NULL is fine. */
void mirror_stop(mirror *m, double wait_s);
/* Copies done, failed attempts, for tests and the end-of-run line. */
void mirror_counts(mirror *m, int *copied, int *failed);

/* The checkpoint a fresh run would resume from: ckpt_find_latest(dir). */
int mirror_find_latest(const char *dir, char *ckdir, size_t cap, int64_t *step);

#endif
