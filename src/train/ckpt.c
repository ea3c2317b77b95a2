#define _GNU_SOURCE
#include "train/ckpt.h"

#include "core/alloc.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_MAGIC "bertc-checkpoint 1\n"

char *ckpt_dir_name(char *buf, size_t cap, const char *run_dir, int64_t step)
{
    snprintf(buf, cap, "%s/checkpoints/step-%08" PRId64, run_dir, step);
    return buf;
}

void ckpt_debug_kill(const char *point, int64_t n)
{
    const char *s = getenv("BERTC_DEBUG_KILL");
    if (!s || !*s) return;
    size_t len = strlen(point);
    if (strncmp(s, point, len) != 0 || s[len] != ':') return;
    char *end;
    long long want = strtoll(s + len + 1, &end, 10);
    if (*end || want != n) return;
    fprintf(stderr, "bertc: BERTC_DEBUG_KILL: killing myself at %s %" PRId64 "\n", point, n);
    fflush(NULL);
    raise(SIGKILL);
}

int ckpt_begin(ckpt_writer *w, const char *run_dir, int64_t step)
{
    memset(w, 0, sizeof *w);
    char parent[CKPT_PATH_MAX];
    if ((size_t)snprintf(parent, sizeof parent, "%s/checkpoints", run_dir) >= sizeof parent)
        return err_set(ERR_INPUT, "%s: path too long", run_dir);
    int rc = mkdir_p(parent);
    if (rc) return err_wrap(rc, "ckpt_begin");
    snprintf(w->run_dir, sizeof w->run_dir, "%s", run_dir);
    ckpt_dir_name(w->final_dir, sizeof w->final_dir, run_dir, step);
    snprintf(w->tmp_dir, sizeof w->tmp_dir, "%s.tmp", w->final_dir);
    w->step = step;
    /* A temp dir of the same step is what a crash left: never trusted. */
    rc = remove_tree(w->tmp_dir);
    if (rc) return err_wrap(rc, "ckpt_begin");
    if (mkdir(w->tmp_dir, 0755) != 0) return err_set(ERR_RUNTIME, "%s: %s", w->tmp_dir, strerror(errno));
    w->open = 1;
    return 0;
}

char *ckpt_path(const ckpt_writer *w, const char *name, char *buf, size_t cap)
{
    return path_join(buf, cap, w->tmp_dir, name);
}

static void manifest_append(ckpt_writer *w, const char *line)
{
    size_t n = strlen(line);
    if (w->mlen + n + 1 > w->mcap) {
        w->mcap = (w->mlen + n + 1) * 2 + 256;
        w->manifest = xrealloc(w->manifest, w->mcap);
    }
    memcpy(w->manifest + w->mlen, line, n + 1);
    w->mlen += n;
}

static int valid_name(const char *name)
{
    if (!*name || !strcmp(name, CKPT_MANIFEST) || !strcmp(name, ".") || !strcmp(name, "..")) return 0;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == ' ' || *p == '\n' || (unsigned char)*p < 32) return 0;
    return strlen(name) < 200;
}

static int record(ckpt_writer *w, const char *name, uint32_t crc, uint64_t size)
{
    char line[300];
    snprintf(line, sizeof line, "%08" PRIx32 " %" PRIu64 " %s\n", crc, size, name);
    manifest_append(w, line);
    return 0;
}

int ckpt_write(ckpt_writer *w, const char *name, const void *data, size_t len)
{
    if (!w->open) return err_set(ERR_RUNTIME, "ckpt_write: %s: writer is not open", name);
    if (!valid_name(name)) return err_set(ERR_RUNTIME, "ckpt_write: invalid file name '%s'", name);
    char path[CKPT_PATH_MAX];
    int rc = file_write_sync(ckpt_path(w, name, path, sizeof path), data, len);
    if (rc) return rc;
    return record(w, name, crc32c(data, len), len);
}

int ckpt_add(ckpt_writer *w, const char *name)
{
    if (!w->open) return err_set(ERR_RUNTIME, "ckpt_add: %s: writer is not open", name);
    if (!valid_name(name)) return err_set(ERR_RUNTIME, "ckpt_add: invalid file name '%s'", name);
    char path[CKPT_PATH_MAX];
    ckpt_path(w, name, path, sizeof path);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return err_set(ERR_RUNTIME, "ckpt_add: %s: %s", path, errno ? strerror(errno) : "not a file");
    uint32_t crc;
    int rc = crc32c_file(path, &crc);
    if (rc) return rc;
    rc = fsync_path(path);
    if (rc) return rc;
    return record(w, name, crc, (uint64_t)st.st_size);
}

int ckpt_commit(ckpt_writer *w, int keep)
{
    if (!w->open) return err_set(ERR_RUNTIME, "ckpt_commit: writer is not open");
    /* The manifest: magic, one line per file, then the CRC of all that. */
    size_t body_len = strlen(MANIFEST_MAGIC) + w->mlen;
    char *text = xmalloc(body_len + 32);
    memcpy(text, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC));
    if (w->mlen) memcpy(text + strlen(MANIFEST_MAGIC), w->manifest, w->mlen);
    uint32_t crc = crc32c(text, body_len);
    int tail = snprintf(text + body_len, 32, "end %08" PRIx32 "\n", crc);
    char path[CKPT_PATH_MAX];
    int rc = file_write_sync(ckpt_path(w, CKPT_MANIFEST, path, sizeof path), text, body_len + (size_t)tail);
    free(text);
    if (rc) return rc;
    rc = fsync_path(w->tmp_dir);
    if (rc) return rc;
    ckpt_debug_kill("ckpt-files", w->step);
    /* Only a damaged or stale checkpoint of the same step can be in the way
     * (a good one would have been resumed from, and the step moved on). */
    if (path_exists(w->final_dir)) {
        rc = remove_tree(w->final_dir);
        if (rc) return rc;
    }
    if (rename(w->tmp_dir, w->final_dir) != 0)
        return err_set(ERR_RUNTIME, "%s: rename to %s: %s", w->tmp_dir, w->final_dir, strerror(errno));
    w->open = 0;
    rc = fsync_parent_dir(w->final_dir);
    if (rc) return rc;
    ckpt_debug_kill("ckpt-renamed", w->step);
    free(w->manifest);
    w->manifest = NULL;
    w->mlen = w->mcap = 0;
    return ckpt_prune(w->run_dir, keep);
}

void ckpt_abort(ckpt_writer *w)
{
    if (w->open) {
        /* Keep the error that made the caller abort. */
        char saved[1024];
        int code = err_code();
        snprintf(saved, sizeof saved, "%s", err_msg());
        remove_tree(w->tmp_dir);
        if (code) err_set(code, "%s", saved);
        else err_clear();
    }
    w->open = 0;
    free(w->manifest);
    w->manifest = NULL;
    w->mlen = w->mcap = 0;
}

/* "step-%08lld" exactly (digits only), with or without ".tmp". */
static int parse_step_name(const char *name, int64_t *step, int *is_tmp)
{
    if (strncmp(name, "step-", 5) != 0) return 0;
    const char *p = name + 5;
    int64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*p - '0');
    }
    if (digits < 1) return 0;
    if (*p == 0) *is_tmp = 0;
    else if (!strcmp(p, ".tmp")) *is_tmp = 1;
    else return 0;
    *step = v;
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int ckpt_list(const char *run_dir, int64_t **steps, int *n)
{
    *steps = NULL;
    *n = 0;
    char parent[CKPT_PATH_MAX];
    snprintf(parent, sizeof parent, "%s/checkpoints", run_dir);
    DIR *d = opendir(parent);
    if (!d) return errno == ENOENT ? 0 : err_set(ERR_RUNTIME, "%s: %s", parent, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t s;
        int tmp;
        if (!parse_step_name(e->d_name, &s, &tmp) || tmp) continue;
        char full[CKPT_PATH_MAX];
        if (!path_is_dir(path_join(full, sizeof full, parent, e->d_name))) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            *steps = xrealloc(*steps, (size_t)cap * sizeof **steps);
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n > 1) qsort(*steps, (size_t)*n, sizeof **steps, cmp_i64);
    return 0;
}

int ckpt_clean_tmp(const char *run_dir)
{
    char parent[CKPT_PATH_MAX];
    snprintf(parent, sizeof parent, "%s/checkpoints", run_dir);
    DIR *d = opendir(parent);
    if (!d) return errno == ENOENT ? 0 : err_set(ERR_RUNTIME, "%s: %s", parent, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL && !rc) {
        int64_t s;
        int tmp;
        if (!parse_step_name(e->d_name, &s, &tmp) || !tmp) continue;
        char full[CKPT_PATH_MAX];
        rc = remove_tree(path_join(full, sizeof full, parent, e->d_name));
    }
    closedir(d);
    return rc;
}

int ckpt_prune(const char *run_dir, int keep)
{
    if (keep <= 0) return 0;
    int64_t *steps;
    int n;
    int rc = ckpt_list(run_dir, &steps, &n);
    if (rc) return rc;
    for (int i = 0; i + keep < n && !rc; i++) {
        char dir[CKPT_PATH_MAX];
        rc = remove_tree(ckpt_dir_name(dir, sizeof dir, run_dir, steps[i]));
    }
    free(steps);
    return rc;
}

int ckpt_verify(const char *dir)
{
    char path[CKPT_PATH_MAX];
    path_join(path, sizeof path, dir, CKPT_MANIFEST);
    char *text;
    size_t len;
    int rc = file_read_all(path, &text, &len);
    if (rc) return err_set(ERR_INPUT, "%s: missing or unreadable (%s)", path, err_msg());
    size_t magic_len = strlen(MANIFEST_MAGIC);
    if (len < magic_len || memcmp(text, MANIFEST_MAGIC, magic_len) != 0) {
        free(text);
        return err_set(ERR_INPUT, "%s: not a bertc checkpoint manifest (bad first line)", path);
    }
    /* The last line is "end CRC" over everything before it. */
    char *end_line = NULL;
    if (len >= magic_len + 13 && text[len - 1] == '\n') {
        end_line = text + len - 13;
        if (end_line[-1] != '\n') end_line = NULL;
    }
    unsigned int want_crc;
    char tail[8];
    if (!end_line || sscanf(end_line, "end %8x%1[\n]", &want_crc, tail) != 2) {
        free(text);
        return err_set(ERR_INPUT, "%s: truncated (no final 'end CRC' line)", path);
    }
    uint32_t got_crc = crc32c(text, (size_t)(end_line - text));
    if (got_crc != want_crc) {
        free(text);
        return err_set(ERR_INPUT, "%s: CRC32C of the manifest is %08" PRIx32 ", its last line says %08x", path, got_crc,
                       want_crc);
    }
    *end_line = 0;
    int lineno = 1, nfiles = 0;
    rc = 0;
    for (char *line = text + magic_len; *line && !rc;) {
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        lineno++;
        unsigned int crc;
        unsigned long long size;
        char name[256];
        int used = 0;
        if (sscanf(line, "%8x %llu %255s%n", &crc, &size, name, &used) != 3 || line[used] != 0 || !valid_name(name)) {
            rc = err_set(ERR_INPUT, "%s:%d: malformed line", path, lineno);
            break;
        }
        char fpath[CKPT_PATH_MAX];
        path_join(fpath, sizeof fpath, dir, name);
        struct stat st;
        if (stat(fpath, &st) != 0 || !S_ISREG(st.st_mode)) {
            rc = err_set(ERR_INPUT, "%s: listed in the manifest but missing", fpath);
            break;
        }
        if ((unsigned long long)st.st_size != size) {
            rc = err_set(ERR_INPUT, "%s: %lld bytes, the manifest says %llu", fpath, (long long)st.st_size, size);
            break;
        }
        uint32_t fcrc;
        rc = crc32c_file(fpath, &fcrc);
        if (rc) break;
        if (fcrc != crc)
            rc = err_set(ERR_INPUT, "%s: CRC32C %08" PRIx32 ", the manifest says %08x (file damaged)", fpath, fcrc, crc);
        nfiles++;
        line = nl + 1;
    }
    free(text);
    if (!rc && nfiles == 0) rc = err_set(ERR_INPUT, "%s: lists no files", path);
    return rc;
}

int ckpt_find_latest(const char *run_dir, char *dir, size_t cap, int64_t *step, int *n_damaged)
{
    if (n_damaged) *n_damaged = 0;
    int64_t *steps;
    int n;
    int rc = ckpt_list(run_dir, &steps, &n);
    if (rc) return rc;
    int found = 0;
    for (int i = n - 1; i >= 0 && !found; i--) {
        char d[CKPT_PATH_MAX];
        ckpt_dir_name(d, sizeof d, run_dir, steps[i]);
        if (ckpt_verify(d) != 0) {
            log_warn("checkpoint %s is damaged and is skipped: %s", d, err_msg());
            err_clear();
            if (n_damaged) (*n_damaged)++;
            continue;
        }
        snprintf(dir, cap, "%s", d);
        *step = steps[i];
        found = 1;
    }
    free(steps);
    return found ? 0 : 1;
}
