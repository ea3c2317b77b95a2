/* The trainer's state.json: everything besides the tensors that a resumed
 * run needs to continue bit for bit, and the fingerprint of the settings and
 * data that must not change across a resume.
 *
 * The fingerprint is a list of (setting, value) strings, e.g.
 * ("--lr", "3e-05"), ("train data", "crc32c 1a2b3c4d"): on resume every
 * setting of the checkpoint is compared with the current one and the first
 * that differs is named in the error. */
#ifndef BERTC_TRAIN_STATE_H
#define BERTC_TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#define TRAIN_STATE_MAX_FP 48

typedef struct {
    char key[48];
    char value[208];
} train_fp_entry;

typedef struct {
    int64_t step;          /* optimizer steps done */
    int64_t epoch;         /* loader position: the epoch ... */
    int64_t cursor;        /* ... and the features of it already consumed */
    uint64_t shuffle_seed; /* the loader's seed */
    uint64_t rng_seed;     /* dropout: philox key */
    uint64_t rng_counter;  /* dropout: philox step of the next micro-batch */
    double loss_scale;     /* the loss scaler's scale (a float); 1 unless fp16 */
    int64_t loss_scale_growth; /* the scaler's clean steps since its last change (train_ckpt.h) */
    int64_t skipped_steps; /* steps skipped for non-finite gradients */
    int64_t skipped_in_row; /* of those, the ones since the last good step (the limit of 20 in a row counts across resumes) */
    int64_t adam_t;        /* Adam updates applied (torch's state["step"]) */
    int64_t restarts;      /* how many times the run was resumed */
    double elapsed_s;      /* training time before this checkpoint */
    double smoothed_loss;  /* the progress line's moving average */
    int64_t examples_seen;
    int64_t ranks;         /* ranks of the run that saved it (stages x data-parallel copies; 1 when absent) */
    int64_t shard_optimizer; /* 1: saved by a run with --shard-optimizer (0 when absent); the moments are whole either way */
    int64_t stages;        /* its pipeline stages (1 when absent; written when more) */
    char version[32];
    train_fp_entry fp[TRAIN_STATE_MAX_FP];
    int nfp;
} train_state;

/* Adds or replaces one fingerprint setting. */
void train_state_fp_set(train_state *s, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *train_state_fp_get(const train_state *s, const char *key);
/* JSON text (malloc'ed, NUL-terminated). */
int train_state_to_json(const train_state *s, char **text, size_t *len);
/* Parses a state.json; ERR_INPUT naming the file and field when malformed. */
int train_state_load(const char *path, train_state *s);
/* 0 when every setting of `saved` has the same value in `now` (and no new
 * one appeared); otherwise ERR_INPUT naming the first setting that differs,
 * with both values. `where` names the run dir in the message. */
int train_state_fp_compare(const train_state *saved, const train_state *now, const char *where);

#endif
