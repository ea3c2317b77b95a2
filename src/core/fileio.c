#define _GNU_SOURCE
#include "fileio.h"
#include "alloc.h"
#include "err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_all(const char *path, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return err_set(errno == ENOENT ? ERR_INPUT : ERR_RUNTIME, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        close(fd);
        return err_set(ERR_INPUT, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : strerror(errno));
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return err_set(ERR_RUNTIME, "%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                return err_set(ERR_RUNTIME, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return err_set(ERR_RUNTIME, "%s: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

/* write() in pieces of at most 1 GiB (Linux writes at most 2 GiB - 4 KiB at once). */
static int write_fd_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int file_write_parts_sync(const char *path, const file_part *parts, int n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) bad = parts[i].len && write_fd_all(fd, parts[i].data, parts[i].len) != 0;
    if (bad || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(path);
        return err_set(ERR_RUNTIME, "%s: %s", path, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(path);
        return err_set(ERR_RUNTIME, "%s: %s", path, strerror(e));
    }
    return 0;
}

int file_write_sync(const char *path, const void *data, size_t len)
{
    file_part part = {data, len};
    return file_write_parts_sync(path, &part, 1);
}

int file_write_parts_atomic(const char *path, const file_part *parts, int n)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return err_set(ERR_INPUT, "%s: path too long", path);
    int rc = file_write_parts_sync(tmp, parts, n);
    if (rc) return rc;
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(ERR_RUNTIME, "%s: rename: %s", path, strerror(e));
    }
    return fsync_parent_dir(path);
}

int file_write_atomic(const char *path, const void *data, size_t len)
{
    file_part part = {data, len};
    return file_write_parts_atomic(path, &part, 1);
}

int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* Some file systems refuse fsync on directories; that is not data loss. */
    if (rc != 0 && e != EINVAL && e != EROFS) return err_set(ERR_RUNTIME, "%s: fsync: %s", path, strerror(e));
    return 0;
}

int fsync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return fsync_path(".");
    if (slash == dir) slash[1] = 0;
    else *slash = 0;
    return fsync_path(dir);
}

int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) return err_set(ERR_INPUT, "%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return err_set(ERR_RUNTIME, "%s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return err_set(ERR_RUNTIME, "%s: %s", buf, strerror(errno));
    if (!path_is_dir(buf)) return err_set(ERR_INPUT, "%s: exists and is not a directory", buf);
    return 0;
}

int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
        struct dirent *e;
        char sub[PATH_MAX];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            int rc = remove_tree(path_join(sub, sizeof sub, path, e->d_name));
            if (rc) {
                closedir(d);
                return rc;
            }
        }
        closedir(d);
        if (rmdir(path) != 0) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
        return 0;
    }
    if (unlink(path) != 0) return err_set(ERR_RUNTIME, "%s: %s", path, strerror(errno));
    return 0;
}

int path_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *path_join(char *dst, size_t cap, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    snprintf(dst, cap, "%s%s%s", dir, (n && dir[n - 1] == '/') ? "" : "/", name);
    return dst;
}

uint64_t hash64(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
