/* Shared helpers for the libFuzzer harnesses (tests/fuzz/README.md).
 *
 * Most of bertc's readers take a path, as users call them, so the input is
 * written to a per-process file in /dev/shm (memory, not disk) and the
 * reader is called on that: the harness then tests exactly the code users
 * run, not an in-memory twin of it. */
#ifndef BERTC_FUZZ_H
#define BERTC_FUZZ_H

#include "core/err.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The LLVMFuzzerInitialize of a harness that needs nothing but quiet logs. */
#define FUZZ_QUIET_INIT                                                                                                \
    int LLVMFuzzerInitialize(int *argc, char ***argv)                                                                  \
    {                                                                                                                  \
        log_quiet(1);                                                                                                  \
        return 0;                                                                                                      \
    }

static char fuzz_dir_[256];

static void fuzz_cleanup_(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_);
    if (fuzz_dir_[0] && system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_);
}

/* A temp dir of this process (under $BERTC_FUZZ_TMP, which scripts/fuzz.sh
 * makes and removes, else /dev/shm), removed at exit; the path of NAME in it. */
static inline const char *fuzz_path(const char *name)
{
    static char path[512];
    if (!fuzz_dir_[0]) {
        const char *base = getenv("BERTC_FUZZ_TMP");
        if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_, sizeof fuzz_dir_, "%s/bertc-fuzz-%d", base, (int)getpid());
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", fuzz_dir_);
        if (system(cmd) != 0) abort();
        atexit(fuzz_cleanup_);
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_dir_, name);
    return path;
}

/* Makes the directory NAME in the temp dir; returns its path (static buffer). */
static inline const char *fuzz_mkdir(const char *name)
{
    const char *path = fuzz_path(name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    if (system(cmd) != 0) abort();
    return path;
}

/* Writes data to NAME in the temp dir; returns its path (static buffer). */
static inline const char *fuzz_write(const char *name, const void *data, size_t size)
{
    const char *path = fuzz_path(name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    const char *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size);
        if (w <= 0) abort();
        p += w;
        size -= (size_t)w;
    }
    close(fd);
    return path;
}

/* $BERTC_DATA/rel (default ../shared/data, as the tests run from the repo root). */
static inline const char *fuzz_data(const char *rel)
{
    static char path[1024];
    const char *d = getenv("BERTC_DATA");
    snprintf(path, sizeof path, "%s/%s", d && *d ? d : "../shared/data", rel);
    return path;
}

/* A library call must return 0 or set an error of its own kind: a failure
 * with no message, or a code that is not one of err.h's, is a bug too. */
static inline void fuzz_check_rc(int rc, const char *what)
{
    if (rc == 0) return;
    if (rc != ERR_INPUT && rc != ERR_RUNTIME) {
        fprintf(stderr, "%s returned %d (not an err.h code): %s\n", what, rc, err_msg());
        abort();
    }
    if (!err_msg() || !err_msg()[0]) {
        fprintf(stderr, "%s failed (%d) without a message\n", what, rc);
        abort();
    }
    /* Off by default (see README: known findings); BERTC_FUZZ_ONE_LINE=1 turns it on. */
    static int one_line = -1;
    if (one_line < 0) one_line = getenv("BERTC_FUZZ_ONE_LINE") && atoi(getenv("BERTC_FUZZ_ONE_LINE"));
    if (one_line && strchr(err_msg(), '\n')) {
        fprintf(stderr, "%s: the error message is not one line: %s\n", what, err_msg());
        abort();
    }
}

/* Invariants that must hold: abort (a crash for libFuzzer) with a message. */
#define FUZZ_ASSERT(cond, ...)                                                    \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            abort();                                                              \
        }                                                                         \
    } while (0)

#endif
