/* Checkpoint dirs: atomic commit, MANIFEST CRCs, damaged-checkpoint
 * detection, --keep pruning, crashes inside a write (a forked child kills
 * itself through BERTC_DEBUG_KILL), and the state.json round trip with its
 * fingerprint comparison. */
#include "testutil.h"

#include "core/err.h"
#include "core/fileio.h"
#include "train/ckpt.h"
#include "train/state.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_ckpt(const char *run, int64_t step, int keep)
{
    ckpt_writer w;
    int rc = ckpt_begin(&w, run, step);
    if (rc) return rc;
    char payload[256];
    snprintf(payload, sizeof payload, "weights of step %lld", (long long)step);
    rc = ckpt_write(&w, "model.bin", payload, strlen(payload));
    char path[CKPT_PATH_MAX];
    if (!rc) {
        FILE *f = fopen(ckpt_path(&w, "other.bin", path, sizeof path), "wb");
        for (int i = 0; i < 100000; i++) fputc(i * 7, f);
        fclose(f);
        rc = ckpt_add(&w, "other.bin");
    }
    if (!rc) rc = ckpt_commit(&w, keep);
    ckpt_abort(&w);
    return rc;
}

static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x20, f);
    fclose(f);
}

static void test_basic(const char *run)
{
    CHECK(write_ckpt(run, 10, 0) == 0, "%s", err_msg());
    CHECK(write_ckpt(run, 20, 0) == 0, "%s", err_msg());
    CHECK(write_ckpt(run, 5, 0) == 0, "%s", err_msg());
    int64_t *steps;
    int n;
    CHECK(ckpt_list(run, &steps, &n) == 0 && n == 3, "n=%d", n);
    if (n == 3) CHECK(steps[0] == 5 && steps[1] == 10 && steps[2] == 20, "order %lld %lld %lld", (long long)steps[0], (long long)steps[1], (long long)steps[2]);
    free(steps);
    char dir[CKPT_PATH_MAX], p[CKPT_PATH_MAX];
    int64_t step = -1;
    int damaged = -1;
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, &damaged) == 0 && step == 20 && damaged == 0,
          "latest %lld damaged %d", (long long)step, damaged);
    printf("latest checkpoint %s\n", dir);
    CHECK(ckpt_verify(dir) == 0, "%s", err_msg());

    /* A flipped byte in the newest: reported, skipped, the previous one used. */
    flip_byte(path_join(p, sizeof p, dir, "other.bin"), 5000);
    CHECK(ckpt_verify(dir) == ERR_INPUT && strstr(err_msg(), "other.bin") && strstr(err_msg(), "CRC32C"), "%s", err_msg());
    printf("damaged: %s\n", err_msg());
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, &damaged) == 0 && step == 10 && damaged == 1,
          "after damage: latest %lld damaged %d", (long long)step, damaged);

    /* A truncated file, a missing file, a damaged manifest. */
    truncate(path_join(p, sizeof p, dir, "model.bin"), 3);
    CHECK(ckpt_verify(dir) == ERR_INPUT && strstr(err_msg(), "model.bin") && strstr(err_msg(), "bytes"), "%s", err_msg());
    printf("truncated: %s\n", err_msg());
    char d5[CKPT_PATH_MAX];
    ckpt_dir_name(d5, sizeof d5, run, 5);
    unlink(path_join(p, sizeof p, d5, "other.bin"));
    CHECK(ckpt_verify(d5) == ERR_INPUT && strstr(err_msg(), "missing"), "%s", err_msg());
    printf("missing: %s\n", err_msg());
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, &damaged) == 1 && damaged == 3, "none valid: damaged %d", damaged);

    /* Rewriting a damaged step replaces it. */
    CHECK(write_ckpt(run, 20, 0) == 0, "%s", err_msg());
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, &damaged) == 0 && step == 20, "rewritten: %lld", (long long)step);

    /* Manifest edits are caught by its own CRC. */
    flip_byte(path_join(p, sizeof p, dir, CKPT_MANIFEST), 25);
    CHECK(ckpt_verify(dir) == ERR_INPUT && strstr(err_msg(), CKPT_MANIFEST), "%s", err_msg());
    printf("manifest: %s\n", err_msg());
    truncate(p, 30);
    CHECK(ckpt_verify(dir) == ERR_INPUT && strstr(err_msg(), "truncated"), "%s", err_msg());
    unlink(p);
    CHECK(ckpt_verify(dir) == ERR_INPUT && strstr(err_msg(), "missing"), "%s", err_msg());

    /* Names that would escape the dir are refused. */
    ckpt_writer w;
    CHECK(ckpt_begin(&w, run, 99) == 0, "%s", err_msg());
    CHECK(ckpt_write(&w, "../evil", "x", 1) != 0, "accepted ../evil");
    CHECK(ckpt_write(&w, CKPT_MANIFEST, "x", 1) != 0, "accepted MANIFEST");
    ckpt_abort(&w);
    char d99[CKPT_PATH_MAX], t99[CKPT_PATH_MAX];
    snprintf(t99, sizeof t99, "%s.tmp", ckpt_dir_name(d99, sizeof d99, run, 99));
    CHECK(!path_exists(t99) && !path_exists(d99), "abort left %s", t99);
}

static void test_keep(const char *run)
{
    for (int s = 1; s <= 5; s++) CHECK(write_ckpt(run, s * 100, 2) == 0, "%s", err_msg());
    int64_t *steps;
    int n;
    ckpt_list(run, &steps, &n);
    CHECK(n == 2 && steps[0] == 400 && steps[1] == 500, "keep 2: n=%d", n);
    printf("keep 2 after 5 saves: %d left\n", n);
    free(steps);
}

/* The child writes a checkpoint and is killed at `point`. */
static int crash_child(const char *run, int64_t step, const char *point)
{
    pid_t pid = fork();
    if (pid == 0) {
        char v[64];
        snprintf(v, sizeof v, "%s:%lld", point, (long long)step);
        setenv("BERTC_DEBUG_KILL", v, 1);
        write_ckpt(run, step, 1);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -1;
}

static void test_crash(const char *run)
{
    CHECK(write_ckpt(run, 1, 1) == 0, "%s", err_msg());
    int sig = crash_child(run, 2, "ckpt-files");
    CHECK(sig == SIGKILL, "child not killed (%d)", sig);
    char dir[CKPT_PATH_MAX], d2[CKPT_PATH_MAX], t2[CKPT_PATH_MAX + 8];
    int64_t step = -1;
    ckpt_dir_name(d2, sizeof d2, run, 2);
    snprintf(t2, sizeof t2, "%s.tmp", d2);
    CHECK(path_exists(t2) && !path_exists(d2), "kill inside the write: tmp %d final %d", path_exists(t2), path_exists(d2));
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, NULL) == 0 && step == 1, "after crash in write: %lld", (long long)step);
    CHECK(ckpt_clean_tmp(run) == 0 && !path_exists(t2), "tmp not cleaned");

    sig = crash_child(run, 3, "ckpt-renamed");
    CHECK(sig == SIGKILL, "child not killed (%d)", sig);
    CHECK(ckpt_find_latest(run, dir, sizeof dir, &step, NULL) == 0 && step == 3, "after crash past rename: %lld", (long long)step);
    int64_t *steps;
    int n;
    ckpt_list(run, &steps, &n);
    CHECK(n == 2, "not yet pruned: n=%d", n); /* step 1 stays until the next prune */
    free(steps);
    printf("crash inside the write keeps step 1; crash after the rename gives step 3\n");
}

static void test_state(const char *dir)
{
    train_state s;
    memset(&s, 0, sizeof s);
    s.step = 1234;
    s.epoch = 1;
    s.cursor = 96;
    s.shuffle_seed = 0xfedcba9876543210ull;
    s.rng_seed = 42;
    s.rng_counter = 0x8000000000000001ull;
    s.loss_scale = 1;
    s.elapsed_s = 123.456789012345;
    s.smoothed_loss = 1.0 / 3.0;
    s.examples_seen = 99999;
    snprintf(s.version, sizeof s.version, "0.1.0");
    train_state_fp_set(&s, "--lr", "%.9g", 3e-5);
    train_state_fp_set(&s, "train data", "crc32c %08x", 0xdeadbeefu);
    train_state_fp_set(&s, "--lr", "%.9g", 5e-5); /* replaces */
    CHECK(s.nfp == 2 && !strcmp(train_state_fp_get(&s, "--lr"), "5e-05"), "fp_set replace: %d", s.nfp);
    char *text;
    size_t len;
    CHECK(train_state_to_json(&s, &text, &len) == 0, "%s", err_msg());
    char path[CKPT_PATH_MAX];
    path_join(path, sizeof path, dir, "state.json");
    file_write_atomic(path, text, len);
    free(text);
    train_state r;
    CHECK(train_state_load(path, &r) == 0, "%s", err_msg());
    CHECK(r.step == s.step && r.epoch == s.epoch && r.cursor == s.cursor && r.shuffle_seed == s.shuffle_seed &&
              r.rng_seed == s.rng_seed && r.rng_counter == s.rng_counter && r.elapsed_s == s.elapsed_s &&
              r.smoothed_loss == s.smoothed_loss && r.examples_seen == s.examples_seen && !strcmp(r.version, "0.1.0"),
          "round trip differs");
    CHECK(train_state_fp_compare(&s, &r, "RUN") == 0, "%s", err_msg());
    train_state_fp_set(&r, "--lr", "%.9g", 3e-5);
    CHECK(train_state_fp_compare(&s, &r, "RUN") == ERR_INPUT && strstr(err_msg(), "--lr") && strstr(err_msg(), "5e-05") &&
              strstr(err_msg(), "3e-05"),
          "%s", err_msg());
    printf("fingerprint: %s\n", err_msg());
    train_state_fp_set(&r, "--lr", "%.9g", 5e-5);
    train_state_fp_set(&r, "--batch", "%d", 12);
    CHECK(train_state_fp_compare(&s, &r, "RUN") == ERR_INPUT && strstr(err_msg(), "--batch"), "%s", err_msg());

    const char *bad[] = {"{", "[]", "{\"format\": \"bertc-train-state\", \"format_version\": 1}",
                         "{\"format\": \"bertc-train-state\", \"format_version\": 2}"};
    const char *want[] = {"state.json:", "format", "step", "format_version"};
    for (int i = 0; i < 4; i++) {
        file_write_atomic(path, bad[i], strlen(bad[i]));
        CHECK(train_state_load(path, &r) == ERR_INPUT && strstr(err_msg(), want[i]), "bad %d: %s", i, err_msg());
        printf("bad state %d: %s\n", i, err_msg());
    }
}

int main(void)
{
    log_quiet(1);
    char base[CKPT_PATH_MAX], run[CKPT_PATH_MAX];
    snprintf(base, sizeof base, "%s", tu_tmpdir());
    test_basic(path_join(run, sizeof run, base, "a"));
    test_keep(path_join(run, sizeof run, base, "b"));
    test_crash(path_join(run, sizeof run, base, "c"));
    test_state(base);
    remove_tree(base);
    return tu_done();
}
