/* What the test programs share: counted checks, a closing "N passed, N
 * failed" line, float comparisons that print what they compared, data and
 * temp paths, checks of refused input, and the small models and batches of
 * the model tests. Built once as a library (bertc_testutil) that every test
 * program links. */
#ifndef BERTC_TESTUTIL_H
#define BERTC_TESTUTIL_H

#include "model/bert.h"
#include "model/config.h"
#include "model/params.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/safetensors.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int tu_pass, tu_fail;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            tu_pass++;                                                                \
        } else {                                                                      \
            tu_fail++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* Compares n floats; prints name, max abs and max rel difference; counts a
 * failure when any |a-b| > atol + rtol*|b|. Returns 1 when they match. */
int tu_close(const char *name, const float *got, const float *want, size_t n, double rtol, double atol);
/* Prints "N passed, N failed" and returns the exit code. */
int tu_done(void);
/* 1 under ASan/UBSan: heavy tests may shrink their work. */
int tu_sanitized(void);

/* Deterministic test data: xorshift64 on tu_rng_state (set it to seed a
 * sequence; it must not be 0). tu_urand is uniform in [0, 1) with 53 bits;
 * tu_fill fills x[0..n) uniformly in [lo, hi). */
extern uint64_t tu_rng_state;
double tu_urand(void);
void tu_fill(float *x, size_t n, double lo, double hi);

/* ---- files ----------------------------------------------------------------
 * tu_data and tu_tmp_path return static buffers, each reused 32 calls later. */

/* Path of a file in ../shared/data (BERTC_DATA). */
const char *tu_data(const char *rel);
/* A fresh empty temp dir for this test (removed by nobody: under /tmp). */
const char *tu_tmpdir(void);
/* Path of name (which may hold a subdir) in tu_tmpdir(). */
const char *tu_tmp_path(const char *name);
/* Writes n bytes to path; a file that cannot be written counts a failure. */
void tu_write_file(const char *path, const void *data, size_t n);
/* Writes text to name in tu_tmpdir(); returns its path. */
const char *tu_write_tmp(const char *name, const char *text);
/* The same for n bytes that may hold NULs. */
const char *tu_write_tmp_bytes(const char *name, const void *data, size_t n);
/* A file's contents, NUL-terminated and malloc'ed; NULL (the error cleared)
 * when it cannot be read. */
char *tu_read_text(const char *path);
/* The number of newlines in s (0 for NULL). */
int tu_count_lines(const char *s);

/* ---- refused input --------------------------------------------------------
 * Checks that rc is ERR_INPUT and that err_msg() names `where` (when not
 * NULL: the file) and holds every string of the NULL-terminated list that
 * follows; one counted check each. Prints what, rc and the message. */
void tu_expect_input_error(const char *what, int rc, const char *where, ...) __attribute__((sentinel));

/* ---- small models ---------------------------------------------------------- */

/* The model tests' config: hidden 32, intermediate 64, 32 positions, the
 * given vocabulary, layers and heads, BertConfig's defaults for the rest
 * (dropout 0.1, pad id 0). */
bert_config tu_small_config(int vocab, int layers, int heads);
/* Parameters (malloc'ed) far from a uniform attention: model_init_random's
 * for seed times 5, LayerNorm gains 1 + 0.01 * (j % gain_period). */
float *tu_model_params(const bert_config *cfg, const param_table *t, uint64_t seed, int gain_period);

/* A padded batch of B rows of T tokens: row b holds lens[b] real tokens
 * (mask 1), then padding (id, type and mask 0). Real token t of row b is
 * 1 + (b*row_mul + t*tok_mul + offset) % (vocab - 1), so never the padding
 * id, and of segment B (type 1) from token seg_start on. */
typedef struct {
    int B, T;
    const int *lens;
    int vocab, row_mul, tok_mul, offset, seg_start;
} tu_batch_spec;
void tu_make_batch(const tu_batch_spec *s, int32_t *ids, int32_t *types, int32_t *mask);

/* A tensor of a reference safetensors file as a malloc'ed array of exactly n
 * elements (tu_st_i32: stored as I32); NULL and a counted failure when it is
 * missing, of another size or type. */
float *tu_st_f32(const st_file *f, const char *name, size_t n);
int32_t *tu_st_i32(const st_file *f, const char *name, size_t n);
/* Mutation testing of a file reader: iters copies of the valid bytes
 * base[0..n), each changed by mutate (in place; the buffer holds n + 8
 * bytes; *len may shrink; it: the copy's number; *state: the caller's
 * generator, from seed) and written to NAME in tu_tmpdir(), then given to
 * load, which returns the reader's code (having checked what it read, when
 * 0). Counts the codes: counts[0] 0, counts[1] ERR_INPUT, counts[2] any
 * other. */
typedef void (*tu_mutate_fn)(char *buf, size_t *len, int it, uint64_t *state);
typedef int (*tu_load_fn)(const char *path, void *arg);
void tu_mutants(const char *name, const void *base, size_t n, int iters, uint64_t seed, tu_mutate_fn mutate,
                tu_load_fn load, void *arg, int counts[3]);
/* The batch of a reference file: its "shape" (B, T), "input_ids",
 * "token_type_ids", "attention_mask" and, with labels, "start_positions"
 * and "end_positions", in malloc'ed arrays (tu_st_batch_free); -1 (counted
 * failures) when one is missing. */
int tu_st_batch(const st_file *f, int labels, bert_batch *b);
void tu_st_batch_free(bert_batch *b);

#endif
