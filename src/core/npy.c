/* NumPy .npy writer and a small reader (npy.h). The header is the Python
 * dict literal numpy writes, padded with spaces to a 64-byte boundary. */
#include "core/npy.h"
#include "core/err.h"
#include "core/fileio.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static int host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Fills hdr with magic, version, length and the padded dict; returns its size. */
static size_t npy_header(char *hdr, size_t cap, npy_dtype dtype, int ndim, const int64_t *shape)
{
    char dict[512], dims[400] = "";
    size_t k = 0;
    for (int i = 0; i < ndim; i++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%lld%s", (long long)shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    const char *descr = dtype == NPY_I32 ? "i4" : "f4";
    int n = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                     host_little_endian() ? '<' : '>', descr, dims);
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap) return 0;
    size_t hlen = total - 10;
    memcpy(hdr, npy_magic, 6);
    hdr[6] = 1;
    hdr[7] = 0;
    hdr[8] = (char)(hlen & 0xff);
    hdr[9] = (char)(hlen >> 8);
    memcpy(hdr + 10, dict, (size_t)n);
    memset(hdr + 10 + n, ' ', hlen - (size_t)n - 1);
    hdr[total - 1] = '\n';
    return total;
}

int npy_write(const char *path, npy_dtype dtype, const void *data, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return err_set(ERR_INPUT, "%s: npy_write: %d dimensions", path, ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return err_set(ERR_INPUT, "%s: npy_write: negative dimension", path);
        if (shape[i] > 0 && count > SIZE_MAX / 4 / (size_t)shape[i])
            return err_set(ERR_INPUT, "%s: npy_write: shape too large", path);
        count *= (size_t)shape[i];
    }
    char hdr[640];
    size_t hn = npy_header(hdr, sizeof hdr, dtype, ndim, shape);
    if (!hn) return err_set(ERR_INPUT, "%s: npy_write: header too long", path);
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return err_set(ERR_INPUT, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return err_set(ERR_RUNTIME, "%s: %s", tmp, strerror(errno));
    int ok = fwrite(hdr, 1, hn, f) == hn && (count == 0 || fwrite(data, 4, count, f) == count);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        return err_set(ERR_RUNTIME, "%s: write: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return err_set(ERR_RUNTIME, "%s: rename: %s", path, strerror(e));
    }
    return fsync_parent_dir(path);
}

/* Finds `'key':` in the header dict and returns what follows, blanks skipped. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "'%s':", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

static int parse_shape(const char *p, int *ndim, int64_t *shape)
{
    if (*p++ != '(') return -1;
    *ndim = 0;
    for (;;) {
        while (*p == ' ') p++;
        if (*p == ')') return 0;
        if (*p < '0' || *p > '9' || *ndim >= NPY_MAX_DIMS) return -1;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 0) return -1;
        shape[(*ndim)++] = v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ')') return -1;
    }
}

int npy_read(const char *path, npy_dtype *dtype, int *ndim, int64_t shape[NPY_MAX_DIMS], void **data)
{
    *data = NULL;
    char *buf;
    size_t len;
    int rc = file_read_all(path, &buf, &len);
    if (rc) return rc;
    size_t hlen = 0, off = 0;
    const char *why = NULL;
    if (len < 10 || memcmp(buf, npy_magic, 6) != 0) why = "not a .npy file (bad magic)";
    else if (buf[6] == 1) {
        hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8;
        off = 10;
    } else if ((buf[6] == 2 || buf[6] == 3) && len >= 12) {
        hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 | (size_t)(unsigned char)buf[10] << 16 |
               (size_t)(unsigned char)buf[11] << 24;
        off = 12;
    } else why = "unsupported format version";
    if (!why && hlen > len - off) why = "header longer than the file";
    if (why) {
        free(buf);
        return err_set(ERR_INPUT, "%s: %s", path, why);
    }
    char hdr[4096];
    size_t hn = hlen < sizeof hdr - 1 ? hlen : sizeof hdr - 1;
    memcpy(hdr, buf + off, hn);
    hdr[hn] = 0;
    const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"), *sh = dict_value(hdr, "shape");
    char want_i[8], want_f[8];
    snprintf(want_i, sizeof want_i, "'%ci4'", host_little_endian() ? '<' : '>');
    snprintf(want_f, sizeof want_f, "'%cf4'", host_little_endian() ? '<' : '>');
    if (!d || (strncmp(d, want_i, 5) && strncmp(d, want_f, 5))) why = "dtype is not int32 or float32 in host byte order";
    else if (!fo || strncmp(fo, "False", 5)) why = "fortran_order is not False";
    else if (!sh || parse_shape(sh, ndim, shape)) why = "bad shape";
    size_t count = 1;
    for (int i = 0; !why && i < *ndim; i++) {
        if (shape[i] > 0 && count > SIZE_MAX / 4 / (uint64_t)shape[i]) why = "shape too large";
        else count *= (size_t)shape[i];
    }
    if (!why && count * 4 != len - off - hlen) why = "data size does not match the shape";
    if (why) {
        free(buf);
        return err_set(ERR_INPUT, "%s: %s", path, why);
    }
    *dtype = strncmp(d, want_i, 5) == 0 ? NPY_I32 : NPY_F32;
    void *out = malloc(count ? count * 4 : 1);
    if (!out) {
        free(buf);
        return err_set(ERR_RUNTIME, "%s: out of memory", path);
    }
    memcpy(out, buf + off + hlen, count * 4);
    free(buf);
    *data = out;
    return 0;
}
