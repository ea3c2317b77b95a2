/* The safetensors codec (see safetensors.h).
 *
 * The reader trusts nothing in the file: every length, offset and shape is
 * checked against the file size (with overflow checks) before a byte of
 * tensor data is read, so a damaged or hostile file is an ERR_INPUT with a
 * message, never a crash. The checks are those of the safetensors library
 * (the data area is covered exactly, in order, with no gaps or overlaps). */
#define _GNU_SOURCE
#include "model/safetensors.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/sbuf.h"
#include "core/shape.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is read in place: little-endian hosts only"
#endif

/* The safetensors library refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)
/* Names are printed with %.*s so that a hostile name cannot flood a message. */
#define NAME_MAX_PRINT 200

static const struct {
    const char *name;
    st_dtype dtype;
    size_t size;
} dtype_table[] = {
    {"F32", ST_F32, 4}, {"F16", ST_F16, 2}, {"BF16", ST_BF16, 2}, {"I32", ST_I32, 4}, {"I64", ST_I64, 8},
};

const char *st_dtype_name(st_dtype d)
{
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (dtype_table[i].dtype == d) return dtype_table[i].name;
    return "?";
}

/* ---- reading ------------------------------------------------------------ */

/* "FILE: tensor NAME: " + the formatted rest, as ERR_INPUT. */
__attribute__((format(printf, 3, 4))) static int tensor_err(const char *path, const char *name, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return err_set(ERR_INPUT, "%s: tensor %.*s: %s", path, NAME_MAX_PRINT, name, what);
}

/* Jansson reports a duplicate key anywhere; a duplicate tensor name is one
 * at depth 1 of the header, which this finds by scanning up to the error. */
static int json_depth_at(const char *text, size_t pos)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < pos; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
    }
    return depth;
}

static int header_json_error(const char *path, const char *text, size_t len, const json_error_t *e)
{
    if (json_error_code(e) == json_error_duplicate_key && e->position >= 0 && (size_t)e->position <= len &&
        json_depth_at(text, (size_t)e->position) == 1) {
        /* Jansson's text is "duplicate object key near '"NAME"'". */
        const char *q = strstr(e->text, "near '\"");
        const char *name = q ? q + 7 : "?";
        int nlen = q ? (int)strcspn(name, "\"") : 1;
        return err_set(ERR_INPUT, "%s: tensor %.*s: duplicate name in the header (line %d, column %d)", path,
                       nlen < NAME_MAX_PRINT ? nlen : NAME_MAX_PRINT, name, e->line, e->column);
    }
    return err_set(ERR_INPUT, "%s: header is not valid JSON (header line %d, column %d: %s)", path, e->line,
                   e->column, e->text);
}

/* A non-negative JSON integer, or -1. */
static int64_t json_uint(const json_t *v)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

static int parse_tensor(const char *path, const char *name, const json_t *v, size_t data_len, st_tensor *t,
                        size_t *begin)
{
    if (!json_is_object(v)) return tensor_err(path, name, "expected an object with dtype, shape and data_offsets");
    const json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
                 *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd)) return tensor_err(path, name, "dtype is missing or not a string");
    const char *ds = json_string_value(jd);
    size_t dsize = 0;
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (!strcmp(ds, dtype_table[i].name)) {
            t->dtype = dtype_table[i].dtype;
            dsize = dtype_table[i].size;
        }
    if (!dsize)
        return tensor_err(path, name, "dtype %.20s is not supported (bertc reads F32, F16, BF16, I32, I64)", ds);
    if (!json_is_array(js)) return tensor_err(path, name, "shape is missing or not an array");
    if (json_array_size(js) > 8)
        return tensor_err(path, name, "shape has %zu dimensions (at most 8)", json_array_size(js));
    t->ndim = (int)json_array_size(js);
    size_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        int64_t d = json_uint(json_array_get(js, (size_t)i));
        if (d < 0) return tensor_err(path, name, "shape[%d] is not a non-negative integer", i);
        t->shape[i] = d;
        numel = mul_size(numel, (size_t)d);
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return tensor_err(path, name, "data_offsets is missing or not a [begin, end] pair");
    int64_t b = json_uint(json_array_get(jo, 0)), e = json_uint(json_array_get(jo, 1));
    if (b < 0 || e < 0) return tensor_err(path, name, "data_offsets are not non-negative integers");
    if (e < b) return tensor_err(path, name, "data_offsets [%lld, %lld] end before they begin", (long long)b, (long long)e);
    if ((uint64_t)e > data_len)
        return tensor_err(path, name, "data_offsets [%lld, %lld] lie outside the data area (%zu bytes; truncated file?)",
                          (long long)b, (long long)e, data_len);
    size_t nbytes = mul_size(numel, dsize);
    if (nbytes != (size_t)(e - b)) {
        char sh[160];
        shape_str(sh, sizeof sh, t->ndim, t->shape);
        return tensor_err(path, name, "shape %s of %s needs %zu bytes but data_offsets [%lld, %lld] hold %lld", sh, ds,
                          nbytes, (long long)b, (long long)e, (long long)(e - b));
    }
    t->numel = numel;
    t->nbytes = nbytes;
    *begin = (size_t)b;
    return 0;
}

typedef struct {
    size_t begin, end;
    int idx;
} st_range;

static int range_cmp(const void *a, const void *b)
{
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx - y->idx;
}

/* The data area must be covered exactly, in offset order: a gap or an
 * overlap means a damaged file (or one no safetensors writer made). */
static int check_coverage(const st_file *f, const size_t *begins, size_t data_len)
{
    if (f->n == 0) {
        if (data_len) return err_set(ERR_INPUT, "%s: no tensors but %zu bytes of data", f->path, data_len);
        return 0;
    }
    st_range *r = xmalloc((size_t)f->n * sizeof *r);
    for (int i = 0; i < f->n; i++) r[i] = (st_range){begins[i], begins[i] + f->tensors[i].nbytes, i};
    qsort(r, (size_t)f->n, sizeof *r, range_cmp);
    size_t expect = 0;
    int rc = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        const char *name = f->tensors[r[i].idx].name;
        if (r[i].begin < expect)
            rc = tensor_err(f->path, name, "data_offsets [%zu, %zu] overlap those of tensor %.*s [%zu, %zu]", r[i].begin,
                            r[i].end, NAME_MAX_PRINT, f->tensors[r[i - 1].idx].name, r[i - 1].begin, r[i - 1].end);
        else if (r[i].begin > expect)
            rc = tensor_err(f->path, name, "data_offsets [%zu, %zu] leave a gap after byte %zu", r[i].begin, r[i].end,
                            expect);
        expect = r[i].end;
    }
    if (!rc && expect != data_len)
        rc = err_set(ERR_INPUT, "%s: the tensors cover %zu bytes but the data area holds %zu (trailing bytes)", f->path,
                     expect, data_len);
    free(r);
    return rc;
}

static int parse_header(st_file *f)
{
    const char *path = f->path;
    const unsigned char *map = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | map[i];
    if (hlen > f->map_len - 8)
        return err_set(ERR_INPUT, "%s: header length %llu runs past the end of the file (%zu bytes; truncated?)", path,
                       (unsigned long long)hlen, f->map_len);
    if (hlen > ST_MAX_HEADER)
        return err_set(ERR_INPUT, "%s: header length %llu is over the 100 MB limit", path, (unsigned long long)hlen);
    const char *text = (const char *)map + 8;
    json_error_t jerr;
    json_t *root = json_loadb(text, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return header_json_error(path, text, (size_t)hlen, &jerr);
    int rc = 0;
    size_t data_len = f->map_len - 8 - (size_t)hlen, *begins = NULL;
    const unsigned char *data = map + 8 + hlen;
    if (!json_is_object(root)) {
        rc = err_set(ERR_INPUT, "%s: header is not a JSON object", path);
        goto done;
    }
    size_t cap = json_object_size(root);
    f->tensors = xcalloc(cap ? cap : 1, sizeof *f->tensors);
    begins = xcalloc(cap ? cap : 1, sizeof *begins);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val) && !json_is_null(val)) {
                rc = err_set(ERR_INPUT, "%s: __metadata__ is not an object", path);
                goto done;
            }
            continue;
        }
        st_tensor *t = &f->tensors[f->n];
        t->name = xstrdup(key);
        f->n++;
        if ((rc = parse_tensor(path, key, val, data_len, t, &begins[f->n - 1]))) goto done;
        t->data = data + begins[f->n - 1];
    }
    rc = check_coverage(f, begins, data_len);
done:
    free(begins);
    json_decref(root);
    return rc;
}

int st_open(const char *path, st_file *f)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(errno == ENOENT ? ERR_INPUT : ERR_RUNTIME, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_RUNTIME, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(ERR_INPUT, "%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return err_set(ERR_INPUT, "%s: truncated: %lld bytes, less than the 8-byte header length", path,
                       (long long)st.st_size);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return err_set(ERR_RUNTIME, "%s: mmap: %s", path, strerror(e));
    f->path = xstrdup(path);
    f->map = map;
    f->map_len = (size_t)st.st_size;
    int rc = parse_header(f);
    if (rc) st_close(f);
    return rc;
}

void st_close(st_file *f)
{
    if (f->map) munmap(f->map, f->map_len);
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

int st_read_f32(const st_file *f, const st_tensor *t, float *out, size_t n)
{
    if (n != t->numel)
        return tensor_err(f->path, t->name, "holds %zu elements, %zu expected", t->numel, n);
    const unsigned char *p = t->data;
    uint16_t h;
    switch (t->dtype) {
    case ST_F32:
        if (n) memcpy(out, p, n * 4);
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, p + 2 * i, 2);
            out[i] = f16_to_float(h);
        }
        return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, p + 2 * i, 2);
            out[i] = bf16_to_float(h);
        }
        return 0;
    default:
        return tensor_err(f->path, t->name, "dtype %s is not a float type", st_dtype_name(t->dtype));
    }
}

int st_read_i64(const st_file *f, const st_tensor *t, int64_t *out, size_t n)
{
    if (n != t->numel)
        return tensor_err(f->path, t->name, "holds %zu elements, %zu expected", t->numel, n);
    const unsigned char *p = t->data;
    if (t->dtype == ST_I64) {
        if (n) memcpy(out, p, n * 8);
        return 0;
    }
    if (t->dtype == ST_I32) {
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = v;
        }
        return 0;
    }
    return tensor_err(f->path, t->name, "dtype %s is not an integer type", st_dtype_name(t->dtype));
}

/* ---- writing ------------------------------------------------------------ */

/* The header: "__metadata__" first, then the tensors in the given order,
 * padded with spaces so that the data starts 8-byte aligned. */
static int build_header(const char *path, const st_entry *entries, int n, sbuf *h)
{
    sb_printf(h, "{\"__metadata__\":{\"format\":\"pt\"}");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const st_entry *e = &entries[i];
        if (!e->name || !e->name[0]) return err_set(ERR_INPUT, "%s: entry %d has no name", path, i);
        if (e->dtype != ST_F32 && e->dtype != ST_I32)
            return tensor_err(path, e->name, "cannot write dtype %s (F32 and I32 only)", st_dtype_name(e->dtype));
        if (e->ndim < 0 || e->ndim > 8) return tensor_err(path, e->name, "%d dimensions (0 to 8)", e->ndim);
        for (int j = 0; j < i; j++)
            if (!strcmp(entries[j].name, e->name)) return tensor_err(path, e->name, "duplicate name");
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] < 0) return tensor_err(path, e->name, "negative dimension");
            numel = mul_size(numel, (size_t)e->shape[d]);
        }
        size_t nbytes = mul_size(numel, 4);
        if (nbytes == SIZE_MAX || off + nbytes < off) return tensor_err(path, e->name, "too large");
        if (nbytes && !e->data) return tensor_err(path, e->name, "no data");
        sb_printf(h, ",");
        sb_json_string(h, e->name, SB_JSON_UNICODE);
        sb_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(e->dtype));
        for (int d = 0; d < e->ndim; d++) sb_printf(h, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        sb_printf(h, "],\"data_offsets\":[%zu,%zu]}", off, off + nbytes);
        off += nbytes;
    }
    sb_printf(h, "}");
    while (h->n % 8) sb_printf(h, " ");
    return 0;
}

int st_write(const char *path, const st_entry *entries, int n, int sync_only)
{
    if (n < 0) return err_set(ERR_INPUT, "%s: %d tensors", path, n);
    sbuf h = {0};
    int rc = build_header(path, entries, n, &h);
    if (rc) {
        sb_free(&h);
        return rc;
    }
    /* 8-byte little-endian header length, the header, then the tensors */
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    file_part *parts = xmalloc(((size_t)n + 2) * sizeof *parts);
    parts[0] = (file_part){len8, 8};
    parts[1] = (file_part){h.p, h.n};
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < entries[i].ndim; d++) numel *= (size_t)entries[i].shape[d];
        parts[i + 2] = (file_part){entries[i].data, numel * 4};
    }
    rc = sync_only ? file_write_parts_sync(path, parts, n + 2) : file_write_parts_atomic(path, parts, n + 2);
    free(parts);
    sb_free(&h);
    return rc;
}

int st_write_params(const char *path, const param_table *t, const float *block)
{
    st_entry *e = xcalloc((size_t)(t->n ? t->n : 1), sizeof *e);
    for (int i = 0; i < t->n; i++) {
        const param_info *pi = &t->info[i];
        e[i] = (st_entry){pi->name, ST_F32, pi->ndim, {pi->shape[0], pi->shape[1]}, block + pi->offset};
    }
    int rc = st_write(path, e, t->n, 0);
    free(e);
    return rc;
}
