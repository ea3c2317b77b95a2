#include "testutil.h"

#include "backend/cpu_kernels.h"
#include "core/err.h"
#include "core/fileio.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tu_pass, tu_fail;

/* Test programs choose their CPU kernels as bertc does (BERTC_CPU_ISA, the
 * OpenBLAS core), before main and any BLAS call; glibc passes main's
 * arguments to constructors. */
__attribute__((constructor)) static void tu_cpu_kernels(int argc, char **argv, char **envp)
{
    (void)envp;
    if (cpu_kernels_init(argc, argv) != 0) {
        fprintf(stderr, "%s\n", err_msg());
        exit(2);
    }
    if (getenv("BERTC_TEST_PRINT_KERNELS")) {
        char line[512];
        printf("kernels: %s\n", cpu_kernels_describe(line, sizeof line));
    }
}

uint64_t tu_rng_state = 0x9E3779B97F4A7C15ull;

double tu_urand(void)
{
    tu_rng_state ^= tu_rng_state << 13;
    tu_rng_state ^= tu_rng_state >> 7;
    tu_rng_state ^= tu_rng_state << 17;
    return (double)(tu_rng_state >> 11) * (1.0 / 9007199254740992.0);
}

void tu_fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * tu_urand());
}

int tu_close(const char *name, const float *got, const float *want, size_t n, double rtol, double atol)
{
    double max_abs = 0, max_rel = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double r = d / (fabs((double)want[i]) + 1e-30);
        if (!(d <= atol + rtol * fabs((double)want[i]))) bad++;
        if (d > max_abs || d != d) { max_abs = d; worst = i; }
        if (r > max_rel && fabs(want[i]) > atol) max_rel = r;
    }
    printf("%-60s n=%-8zu max_abs=%.3e max_rel=%.3e %s\n", name, n, max_abs, max_rel, bad ? "MISMATCH" : "ok");
    if (bad) {
        tu_fail++;
        fprintf(stderr, "FAIL %s: %zu of %zu beyond rtol %.1e atol %.1e; worst [%zu] got %.9g want %.9g\n", name, bad,
                n, rtol, atol, worst, got[worst], want[worst]);
        return 0;
    }
    tu_pass++;
    return 1;
}

int tu_done(void)
{
    printf("%d passed, %d failed\n", tu_pass, tu_fail);
    return tu_fail ? 1 : 0;
}

int tu_sanitized(void)
{
    const char *s = getenv("BERTC_SANITIZED");
    return s && *s == '1';
}

/* ---- files ---------------------------------------------------------------- */

/* A path buffer of a pool of 32 used in turn (tu_data and tu_tmp_path each have one). */
typedef struct {
    char buf[32][4096];
    int next;
} path_pool;

static char *pool_next(path_pool *p)
{
    return p->buf[p->next++ % 32];
}

const char *tu_data(const char *rel)
{
    static path_pool pool;
    const char *root = getenv("BERTC_DATA");
    char *b = pool_next(&pool);
    snprintf(b, sizeof pool.buf[0], "%s/%s", root ? root : "../shared/data", rel);
    return b;
}

const char *tu_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/bertc-test-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(1);
        }
    }
    return dir;
}

const char *tu_tmp_path(const char *name)
{
    static path_pool pool;
    char *b = pool_next(&pool);
    snprintf(b, sizeof pool.buf[0], "%s/%s", tu_tmpdir(), name);
    return b;
}

void tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) {
        tu_fail++;
        fprintf(stderr, "FAIL: cannot write %s: %s\n", path, strerror(errno));
    }
}

const char *tu_write_tmp_bytes(const char *name, const void *data, size_t n)
{
    const char *p = tu_tmp_path(name);
    tu_write_file(p, data, n);
    return p;
}

void tu_mutants(const char *name, const void *base, size_t n, int iters, uint64_t seed, tu_mutate_fn mutate,
                tu_load_fn load, void *arg, int counts[3])
{
    char *buf = malloc(n + 8);
    uint64_t state = seed;
    counts[0] = counts[1] = counts[2] = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(buf, base, n);
        size_t len = n;
        mutate(buf, &len, it, &state);
        int rc = load(tu_write_tmp_bytes(name, buf, len), arg);
        counts[rc == 0 ? 0 : rc == ERR_INPUT ? 1 : 2]++;
    }
    free(buf);
}

const char *tu_write_tmp(const char *name, const char *text)
{
    return tu_write_tmp_bytes(name, text, strlen(text));
}

char *tu_read_text(const char *path)
{
    char *data;
    size_t len;
    if (file_read_all(path, &data, &len) != 0) {
        err_clear();
        return NULL;
    }
    return data;
}

int tu_count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* ---- refused input -------------------------------------------------------- */

void tu_expect_input_error(const char *what, int rc, const char *where, ...)
{
    const char *msg = err_msg();
    printf("%-28s rc=%d: %s\n", what, rc, rc ? msg : "(accepted)");
    CHECK(rc == ERR_INPUT, "%s: rc %d, want %d", what, rc, ERR_INPUT);
    if (where) CHECK(strstr(msg, where) != NULL, "%s: message does not name %s: %s", what, where, msg);
    va_list ap;
    va_start(ap, where);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
        CHECK(strstr(msg, want) != NULL, "%s: message lacks '%s': %s", what, want, msg);
    va_end(ap);
}

/* ---- small models --------------------------------------------------------- */

bert_config tu_small_config(int vocab, int layers, int heads)
{
    bert_config c;
    config_defaults(&c);
    c.vocab_size = vocab;
    c.hidden_size = 32;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.intermediate_size = 64;
    c.max_position_embeddings = 32;
    return c;
}

float *tu_model_params(const bert_config *cfg, const param_table *t, uint64_t seed, int gain_period)
{
    float *p = malloc(t->total * sizeof *p);
    if (!p) return NULL;
    model_init_random(cfg, t, p, seed);
    for (size_t j = 0; j < t->total; j++) p[j] *= 5;
    for (int i = 0; i < t->n; i++)
        if (t->info[i].init == PARAM_INIT_ONE)
            for (size_t j = 0; j < t->info[i].numel; j++)
                p[t->info[i].offset + j] = 1.0f + 0.01f * (float)(j % (size_t)gain_period);
    return p;
}

void tu_make_batch(const tu_batch_spec *s, int32_t *ids, int32_t *types, int32_t *mask)
{
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++) {
            size_t i = (size_t)b * s->T + t;
            int real = t < s->lens[b];
            ids[i] = real ? 1 + (b * s->row_mul + t * s->tok_mul + s->offset) % (s->vocab - 1) : 0;
            types[i] = real && t >= s->seg_start;
            mask[i] = real;
        }
}

float *tu_st_f32(const st_file *f, const char *name, size_t n)
{
    const st_tensor *t = st_find(f, name);
    if (!t || t->numel != n) {
        CHECK(0, "reference tensor %s: %s (want %zu elements)", name, t ? "wrong size" : "missing", n);
        return NULL;
    }
    float *out = malloc(n * sizeof *out);
    if (st_read_f32(f, t, out, n)) {
        CHECK(0, "reading %s: %s", name, err_msg());
        free(out);
        return NULL;
    }
    return out;
}

int32_t *tu_st_i32(const st_file *f, const char *name, size_t n)
{
    const st_tensor *t = st_find(f, name);
    if (!t || t->dtype != ST_I32 || t->numel != n) {
        CHECK(0, "reference tensor %s: missing, not I32 or not %zu elements", name, n);
        return NULL;
    }
    int32_t *out = malloc(n * sizeof *out);
    memcpy(out, t->data, n * sizeof *out); /* the mapping need not be 4-byte aligned */
    return out;
}

int tu_st_batch(const st_file *f, int labels, bert_batch *b)
{
    memset(b, 0, sizeof *b);
    int32_t *shape = tu_st_i32(f, "shape", 2);
    if (!shape) return -1;
    b->B = shape[0];
    b->T = shape[1];
    free(shape);
    size_t BT = (size_t)b->B * b->T;
    b->input_ids = tu_st_i32(f, "input_ids", BT);
    b->token_type_ids = tu_st_i32(f, "token_type_ids", BT);
    b->attention_mask = tu_st_i32(f, "attention_mask", BT);
    if (labels) {
        b->start_positions = tu_st_i32(f, "start_positions", (size_t)b->B);
        b->end_positions = tu_st_i32(f, "end_positions", (size_t)b->B);
    }
    int ok = b->input_ids && b->token_type_ids && b->attention_mask && (!labels || (b->start_positions && b->end_positions));
    return ok ? 0 : -1;
}

void tu_st_batch_free(bert_batch *b)
{
    free((void *)b->input_ids);
    free((void *)b->token_type_ids);
    free((void *)b->attention_mask);
    free((void *)b->start_positions);
    free((void *)b->end_positions);
}
