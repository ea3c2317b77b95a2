/* --mirror (train/mirror.h): checkpoints copied in the background,
 * atomically, verified, pruned to K; a busy mirror skips to the newest; a
 * failed copy is retried; a missing or unwritable mirror dir is refused at
 * the start (the trainer then goes on without it); a checkpoint that left
 * the run dir is skipped; the mirror is where a fresh run dir resumes. */
#define _GNU_SOURCE
#include "testutil.h"
#include "core/err.h"
#include "core/fileio.h"
#include "train/ckpt.h"
#include "train/mirror.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void make_ckpt(const char *run, int64_t step, char *dir, size_t cap)
{
    ckpt_writer w;
    CHECK(ckpt_begin(&w, run, step) == 0, "begin: %s", err_msg());
    char data[3000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7 + step);
    CHECK(ckpt_write(&w, "model.safetensors", data, sizeof data) == 0, "write");
    CHECK(ckpt_write(&w, "state.json", "{\"step\":1}", 10) == 0, "write");
    CHECK(ckpt_commit(&w, 0) == 0, "commit: %s", err_msg());
    ckpt_abort(&w);
    ckpt_dir_name(dir, cap, run, step);
}

/* How often needle stands in the file at path (0 when it cannot be read). */
static int occurrences(const char *path, const char *needle)
{
    char *d = tu_read_text(path);
    int k = 0;
    for (char *p = d; p && (p = strstr(p, needle)) != NULL; p++) k++;
    free(d);
    return k;
}

int main(void)
{
    log_quiet(1);
    char run[512], mdir[512], src[4096], log[600], dst[4200];
    snprintf(run, sizeof run, "%s/run", tu_tmpdir());
    snprintf(mdir, sizeof mdir, "%s/drive", tu_tmpdir());
    snprintf(log, sizeof log, "%s/mirror.log", run);
    mkdir_p(run);

    /* missing and unwritable mirror dirs */
    mirror *m = NULL;
    CHECK(mirror_start(&m, mdir, 2, run, NULL) == ERR_RUNTIME && !m, "missing dir accepted");
    printf("missing: %s\n", err_msg());
    CHECK(strstr(err_msg(), "no such directory") != NULL, "message: %s", err_msg());
    err_clear();
    CHECK(mkdir(mdir, 0755) == 0, "mkdir");
    if (geteuid() != 0) {
        chmod(mdir, 0555);
        CHECK(mirror_start(&m, mdir, 2, run, NULL) == ERR_RUNTIME && !m, "read-only dir accepted");
        printf("read-only: %s\n", err_msg());
        err_clear();
        chmod(mdir, 0755);
    } else {
        printf("read-only dir: not checked (running as root)\n");
    }

    /* copies, keep 2 */
    CHECK(mirror_start(&m, mdir, 2, run, NULL) == 0, "start: %s", err_msg());
    for (int64_t s = 10; s <= 30; s += 10) {
        make_ckpt(run, s, src, sizeof src);
        mirror_submit(m, src, s);
        for (int i = 0; i < 500; i++) { /* wait until copied, so none is skipped */
            int c, f;
            mirror_counts(m, &c, &f);
            if (c == s / 10) break;
            usleep(10000);
        }
    }
    mirror_stop(m, 30);
    int64_t *steps = NULL;
    int n = 0;
    CHECK(ckpt_list(mdir, &steps, &n) == 0 && n == 2 && steps[0] == 20 && steps[1] == 30, "mirror holds %d", n);
    free(steps);
    ckpt_dir_name(dst, sizeof dst, mdir, 30);
    CHECK(ckpt_verify(dst) == 0, "copy verifies: %s", err_msg());
    char a[4300], b[4300];
    char *x, *y;
    size_t nx, ny;
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    snprintf(b, sizeof b, "%s/model.safetensors", dst);
    CHECK(file_read_all(a, &x, &nx) == 0 && file_read_all(b, &y, &ny) == 0 && nx == ny && !memcmp(x, y, nx), "same bytes");
    free(x);
    free(y);
    CHECK(occurrences(log, "copied to ") == 3, "mirror.log has %d copies", occurrences(log, "copied to "));
    char ck[4096];
    int64_t st = 0;
    CHECK(mirror_find_latest(mdir, ck, sizeof ck, &st) == 0 && st == 30, "resume point %lld", (long long)st);

    /* a busy mirror skips to the newest; a pruned source is skipped */
    setenv("BERTC_DEBUG_MIRROR_DELAY_MS", "300", 1);
    CHECK(mirror_start(&m, mdir, 0, run, NULL) == 0, "start");
    unsetenv("BERTC_DEBUG_MIRROR_DELAY_MS");
    int64_t want[] = {40, 50, 60};
    for (int i = 0; i < 3; i++) {
        make_ckpt(run, want[i], src, sizeof src);
        mirror_submit(m, src, want[i]);
        usleep(20000);
    }
    mirror_submit(m, "/nonexistent/checkpoints/step-00000070", 70);
    mirror_stop(m, 30);
    ckpt_dir_name(dst, sizeof dst, mdir, 40);
    CHECK(path_is_dir(dst), "step 40 copied");
    ckpt_dir_name(dst, sizeof dst, mdir, 50);
    CHECK(!path_is_dir(dst), "step 50 should have been skipped for a newer one");
    CHECK(occurrences(log, "step-00000050 skipped") == 1, "skip of 50 logged");
    CHECK(occurrences(log, "step-00000060 skipped") == 1, "60 replaced by 70 logged");
    CHECK(occurrences(log, "step-00000070 skipped: the checkpoint left the run dir") == 1, "gone source logged");

    /* failures are retried */
    setenv("BERTC_DEBUG_MIRROR_FAIL", "2", 1);
    setenv("BERTC_DEBUG_MIRROR_BACKOFF_MS", "20", 1);
    CHECK(mirror_start(&m, mdir, 0, run, NULL) == 0, "start");
    make_ckpt(run, 80, src, sizeof src);
    mirror_submit(m, src, 80);
    mirror_stop(m, 30);
    int c = 0, f = 0;
    ckpt_dir_name(dst, sizeof dst, mdir, 80);
    CHECK(path_is_dir(dst) && ckpt_verify(dst) == 0, "step 80 copied after failures");
    CHECK(occurrences(log, "step-00000080 failed: try 1 of 5") == 1 && occurrences(log, "try 2 of 5") == 1,
          "failures logged");
    /* a copy that always fails gives up after 5 tries, without a temp dir left */
    setenv("BERTC_DEBUG_MIRROR_FAIL", "100", 1);
    CHECK(mirror_start(&m, mdir, 0, run, NULL) == 0, "start");
    make_ckpt(run, 90, src, sizeof src);
    mirror_submit(m, src, 90);
    mirror_stop(m, 30);
    (void)c, (void)f;
    CHECK(occurrences(log, "step-00000090 failed: try 5 of 5") == 1, "gave up after 5");
    ckpt_dir_name(dst, sizeof dst, mdir, 90);
    CHECK(!path_exists(dst), "no step 90 in the mirror");
    unsetenv("BERTC_DEBUG_MIRROR_FAIL");
    return tu_done();
}
