/* Checkpoint directories: atomic, checksummed, pruned.
 *
 * A checkpoint is RUN/checkpoints/step-00001234/ holding any files the
 * trainer writes (model.safetensors, optimizer.safetensors, state.json) and
 * MANIFEST, which lists the CRC32C and size of every other file and ends
 * with a CRC of its own text. It is written as step-N.tmp/, every file
 * fsync'ed, then renamed to step-N/ and the checkpoints dir fsync'ed: a
 * crash at any moment leaves either the complete new checkpoint or none, and
 * the older ones untouched (pruning to --keep happens after the rename).
 *
 * Writing:
 *   ckpt_writer w;
 *   ckpt_begin(&w, run_dir, step);                  // makes step-N.tmp/
 *   ckpt_write(&w, "state.json", text, len);         // writes + fsyncs + records
 *   st_write(ckpt_path(&w, "model.safetensors", buf, sizeof buf), ..., 1);
 *   ckpt_add(&w, "model.safetensors");               // a file written by someone else
 *   ckpt_commit(&w, keep);                           // MANIFEST, rename, prune
 * On any failure call ckpt_abort(&w) (removes the temp dir).
 *
 * Reading: ckpt_find_latest() returns the newest checkpoint whose MANIFEST
 * and CRCs verify; a damaged one is reported with log_warn and skipped. */
#ifndef BERTC_CKPT_H
#define BERTC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_PATH_MAX 4096
#define CKPT_MANIFEST "MANIFEST"

typedef struct {
    char tmp_dir[CKPT_PATH_MAX + 8]; /* RUN/checkpoints/step-N.tmp */
    char final_dir[CKPT_PATH_MAX]; /* RUN/checkpoints/step-N */
    char run_dir[CKPT_PATH_MAX];
    int64_t step;
    char *manifest; /* lines "crc size name\n" so far */
    size_t mlen, mcap;
    int open;
} ckpt_writer;

/* RUN/checkpoints/step-%08lld into buf; returns buf. */
char *ckpt_dir_name(char *buf, size_t cap, const char *run_dir, int64_t step);

int ckpt_begin(ckpt_writer *w, const char *run_dir, int64_t step);
/* Path of NAME inside the temp dir, for files written by another writer. */
char *ckpt_path(const ckpt_writer *w, const char *name, char *buf, size_t cap);
/* Writes NAME (fsync'ed) and records its CRC. */
int ckpt_write(ckpt_writer *w, const char *name, const void *data, size_t len);
/* Records a file already written (and fsync'ed) in the temp dir. */
int ckpt_add(ckpt_writer *w, const char *name);
/* Writes MANIFEST, renames the temp dir into place (replacing a damaged
 * step-N/ of the same step if there is one), fsyncs, then keeps only the
 * newest `keep` checkpoints (keep <= 0 keeps all). */
int ckpt_commit(ckpt_writer *w, int keep);
/* Removes the temp dir and frees the writer; safe after commit. */
void ckpt_abort(ckpt_writer *w);

/* Steps of the complete (renamed) checkpoint dirs under RUN/checkpoints,
 * ascending; *steps is malloc'ed (NULL when none). A missing dir is 0 of them. */
int ckpt_list(const char *run_dir, int64_t **steps, int *n);
/* Checks MANIFEST (format, its own CRC) and every listed file's size and
 * CRC32C; ERR_INPUT with a message naming the file otherwise. */
int ckpt_verify(const char *dir);
/* The newest checkpoint that verifies: 0 and dir/step filled, 1 when there
 * is none (damaged ones are reported with log_warn and skipped), or an
 * error code. *n_damaged counts the skipped ones (may be NULL). */
int ckpt_find_latest(const char *run_dir, char *dir, size_t cap, int64_t *step, int *n_damaged);
/* Removes leftover step-N.tmp dirs (from a crash) under RUN/checkpoints. */
int ckpt_clean_tmp(const char *run_dir);
/* Keeps the newest `keep` complete checkpoints (keep <= 0: all). */
int ckpt_prune(const char *run_dir, int keep);

/* Test hook: when the environment variable BERTC_DEBUG_KILL is "POINT:N",
 * the process sends itself SIGKILL when it passes POINT with step N (the
 * run's global optimizer step, so the moment is the same whatever happened
 * before). Points: "step" (optimizer step N done, nothing saved yet),
 * "ckpt-files" (inside the write of checkpoint N: files written and synced,
 * not yet renamed), "ckpt-renamed" (after the rename, before pruning). */
void ckpt_debug_kill(const char *point, int64_t n);

#endif
