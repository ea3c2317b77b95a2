/* Whole-file reads and crash-safe writes.
 *
 * file_write_atomic writes PATH.tmp.<pid>, fsyncs it, renames it over PATH and
 * fsyncs the directory: after a crash PATH is either the old file or the new
 * one, never a mixture. */
#ifndef BERTC_FILEIO_H
#define BERTC_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* Reads the whole file; *data is NUL-terminated (not counted in *len). */
int file_read_all(const char *path, char **data, size_t *len);
int file_write_atomic(const char *path, const void *data, size_t len);
/* Writes and fsyncs (no rename): for files inside a temp dir that is renamed. */
int file_write_sync(const char *path, const void *data, size_t len);
/* The same for data in several pieces, written in order (a header and its
 * tensors, say): nothing is copied into one buffer first. */
typedef struct {
    const void *data;
    size_t len;
} file_part;
int file_write_parts_sync(const char *path, const file_part *parts, int n);
int file_write_parts_atomic(const char *path, const file_part *parts, int n);
int fsync_path(const char *path);
int fsync_parent_dir(const char *path);
int mkdir_p(const char *path);
/* Removes a directory tree (rm -rf); missing is not an error. */
int remove_tree(const char *path);
int path_is_dir(const char *path);
int path_exists(const char *path);
/* dst = dir + "/" + name, truncated safely; returns dst. */
char *path_join(char *dst, size_t cap, const char *dir, const char *name);
/* 64-bit FNV-1a, for fingerprints (data and vocab hashes). */
uint64_t hash64(const void *data, size_t n, uint64_t h);
#define HASH64_INIT 0xcbf29ce484222325ull

#endif
