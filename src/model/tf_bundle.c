/* TensorFlow tensor bundles: the LevelDB-style table of the .index file,
 * the protobuf messages in it, and the data shards (see tf_bundle.h).
 *
 * Table layout (TensorFlow's lib/io/table, LevelDB's format):
 *   footer (last 48 bytes): metaindex handle, index handle (each two
 *     varint64: offset, size), zero padding to 40 bytes, then the magic
 *     0xdb4775248b80fb57 as a little-endian fixed64;
 *   block: `size` bytes of entries and restart array, then 1 byte of
 *     compression type and 4 bytes of masked CRC-32C over the bytes and
 *     the type byte;
 *   entry: varint32 shared, varint32 non_shared, varint32 value_length, the
 *     key's non-shared bytes, the value; the key is the previous key's first
 *     `shared` bytes followed by the non-shared bytes;
 *   restart array: uint32 offsets of entries whose shared is 0, then a
 *     uint32 count.
 * The index block maps a separator key (>= every key of a data block) to
 * that block's handle. */
#define _GNU_SOURCE
#include "model/tf_bundle.h"
#include "core/alloc.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/shape.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor bundle data is little-endian: little-endian hosts only"
#endif

#define TABLE_MAGIC 0xdb4775248b80fb57ull
#define FOOTER_LEN 48
#define BLOCK_TRAILER 5
#define MAX_SHARDS 100000
#define MAX_ENTRIES 10000000
#define NAME_PRINT 120

int tfb_check_block_crc = 1;

static uint32_t crc_unmask(uint32_t m)
{
    uint32_t r = m - 0xa282ead8u;
    return (r >> 17) | (r << 15);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A varint of at most `maxbytes` bytes from [*p, end); 0 on success. */
static int varint(const unsigned char **p, const unsigned char *end, int maxbytes, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < maxbytes; i++) {
        if (*p >= end) return -1;
        unsigned char c = *(*p)++;
        if (i == 9 && c > 1) return -1; /* bits past 64 */
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

const char *tfb_dtype_name(int dtype, char *buf, size_t cap)
{
    switch (dtype) {
    case TFB_DT_FLOAT: return "float";
    case TFB_DT_DOUBLE: return "double";
    case TFB_DT_INT32: return "int32";
    case 4: return "uint8";
    case 5: return "int16";
    case 6: return "int8";
    case TFB_DT_STRING: return "string";
    case TFB_DT_INT64: return "int64";
    case TFB_DT_BOOL: return "bool";
    case TFB_DT_BFLOAT16: return "bfloat16";
    case 17: return "uint16";
    case TFB_DT_HALF: return "half";
    case 22: return "uint32";
    case 23: return "uint64";
    default: snprintf(buf, cap, "dtype %d", dtype); return buf;
    }
}

/* Bytes per element; 0 for types of variable or unknown size. */
static int dtype_size(int dtype)
{
    switch (dtype) {
    case TFB_DT_FLOAT: case TFB_DT_INT32: case 22: return 4;
    case TFB_DT_DOUBLE: case TFB_DT_INT64: case 23: return 8;
    case 4: case 6: case TFB_DT_BOOL: return 1;
    case 5: case TFB_DT_BFLOAT16: case 17: case TFB_DT_HALF: return 2;
    default: return 0;
    }
}

/* ---- protobuf ------------------------------------------------------------ */

typedef struct {
    const unsigned char *p, *end;
} pb;

typedef struct {
    uint32_t field;
    int wire;
    uint64_t v;                    /* varint, fixed32, fixed64 */
    const unsigned char *data;     /* length-delimited */
    size_t len;
} pb_field;

/* Next field: 1 got one, 0 at the end, -1 malformed (what names why). */
static int pb_next(pb *m, pb_field *f, const char **what)
{
    if (m->p >= m->end) return 0;
    uint64_t tag;
    if (varint(&m->p, m->end, 10, &tag)) return *what = "truncated or overlong field tag", -1;
    f->field = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (f->field == 0 || tag >> 32) return *what = "field number 0 or out of range", -1;
    switch (f->wire) {
    case 0:
        if (varint(&m->p, m->end, 10, &f->v)) return *what = "truncated varint", -1;
        return 1;
    case 1:
        if (m->end - m->p < 8) return *what = "truncated fixed64", -1;
        f->v = le64(m->p);
        m->p += 8;
        return 1;
    case 5:
        if (m->end - m->p < 4) return *what = "truncated fixed32", -1;
        f->v = le32(m->p);
        m->p += 4;
        return 1;
    case 2: {
        uint64_t n;
        if (varint(&m->p, m->end, 10, &n)) return *what = "truncated length", -1;
        if (n > (uint64_t)(m->end - m->p)) return *what = "length runs past the end of the message", -1;
        f->data = m->p;
        f->len = (size_t)n;
        m->p += n;
        return 1;
    }
    default:
        return *what = "unsupported wire type (groups or invalid)", -1;
    }
}

typedef struct {
    const char *path;
    const char *key; /* for messages */
} ctx;

__attribute__((format(printf, 2, 3))) static int entry_err(const ctx *c, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!c->key[0]) return err_set(ERR_INPUT, "%s: bundle header: %s", c->path, what);
    return err_set(ERR_INPUT, "%s: tensor %.*s: %s", c->path, NAME_PRINT, c->key, what);
}

static int wire_is(const ctx *c, const pb_field *f, int wire, const char *name)
{
    if (f->wire == wire) return 0;
    return entry_err(c, "field %u (%s) has wire type %d, expected %d", f->field, name, f->wire, wire);
}

static int parse_header(const ctx *c, const unsigned char *v, size_t len, int *num_shards)
{
    pb m = {v, v + len};
    pb_field f;
    const char *what = NULL;
    int r, rc;
    uint64_t shards = 0;
    while ((r = pb_next(&m, &f, &what)) == 1) {
        if (f.field == 1) {
            if ((rc = wire_is(c, &f, 0, "num_shards"))) return rc;
            shards = f.v;
        } else if (f.field == 2) {
            if ((rc = wire_is(c, &f, 0, "endianness"))) return rc;
            if (f.v != 0)
                return entry_err(c, "endianness %llu: the checkpoint is big-endian, which bertc does not read",
                                 (unsigned long long)f.v);
        } else if (f.field == 3) {
            if ((rc = wire_is(c, &f, 2, "version"))) return rc;
            pb vm = {f.data, f.data + f.len};
            pb_field g;
            while ((r = pb_next(&vm, &g, &what)) == 1) {
                /* VersionDef: producer 1, min_consumer 2, bad_consumers 3.
                 * TensorFlow's reader is version 1; so is this one. */
                if (g.field == 2 && g.wire == 0 && g.v > 1)
                    return entry_err(c, "version.min_consumer %llu: written for a newer reader (bertc reads 1)",
                                     (unsigned long long)g.v);
            }
            if (r < 0) return entry_err(c, "version: %s", what);
        }
    }
    if (r < 0) return entry_err(c, "%s", what);
    if (shards < 1 || shards > MAX_SHARDS)
        return entry_err(c, "num_shards %llu is outside 1..%d", (unsigned long long)shards, MAX_SHARDS);
    *num_shards = (int)shards;
    return 0;
}

static int parse_shape(const ctx *c, const unsigned char *v, size_t len, tfb_entry *e)
{
    pb m = {v, v + len};
    pb_field f;
    const char *what = NULL;
    int r, rc;
    e->ndim = 0;
    while ((r = pb_next(&m, &f, &what)) == 1) {
        if (f.field == 2) { /* dim */
            if ((rc = wire_is(c, &f, 2, "shape.dim"))) return rc;
            if (e->ndim == TFB_MAX_DIMS) return entry_err(c, "shape has more than %d dimensions", TFB_MAX_DIMS);
            pb dm = {f.data, f.data + f.len};
            pb_field g;
            int64_t size = 0;
            while ((r = pb_next(&dm, &g, &what)) == 1) {
                if (g.field == 1) {
                    if ((rc = wire_is(c, &g, 0, "shape.dim.size"))) return rc;
                    size = (int64_t)g.v;
                }
            }
            if (r < 0) return entry_err(c, "shape.dim: %s", what);
            if (size < 0) return entry_err(c, "shape dimension %d is %lld (unknown or negative)", e->ndim, (long long)size);
            e->shape[e->ndim++] = size;
        } else if (f.field == 3) {
            if ((rc = wire_is(c, &f, 0, "shape.unknown_rank"))) return rc;
            if (f.v) return entry_err(c, "shape has unknown rank");
        }
    }
    if (r < 0) return entry_err(c, "shape: %s", what);
    return 0;
}

static int parse_entry(const ctx *c, const unsigned char *v, size_t len, int num_shards, tfb_entry *e)
{
    pb m = {v, v + len};
    pb_field f;
    const char *what = NULL;
    int r, rc;
    /* BundleEntryProto's fields 1 to 6: wire type and name; 7 (slices) is refused. */
    static const struct {
        int wire;
        const char *name;
    } fields[7] = {[1] = {0, "dtype"},  [2] = {2, "shape"}, [3] = {0, "shard_id"},
                   [4] = {0, "offset"}, [5] = {0, "size"},  [6] = {5, "crc32c"}};
    uint64_t num[7] = {0}; /* the varints: dtype, shard_id, offset, size by field number */
    while ((r = pb_next(&m, &f, &what)) == 1) {
        if (f.field == 7) return entry_err(c, "saved in slices (a partitioned variable), which bertc does not read");
        if (f.field < 1 || f.field > 6) continue; /* unknown fields are skipped, as protobuf does */
        if ((rc = wire_is(c, &f, fields[f.field].wire, fields[f.field].name))) return rc;
        if (f.field == 2) {
            if ((rc = parse_shape(c, f.data, f.len, e))) return rc;
        } else if (f.field == 6) {
            e->crc32c = crc_unmask((uint32_t)f.v);
            e->has_crc = 1;
        } else {
            num[f.field] = f.v;
        }
    }
    uint64_t dtype = num[1], shard = num[3], offset = num[4], size = num[5];
    if (r < 0) return entry_err(c, "%s", what);
    char dn[32];
    if (dtype == 0 || dtype > 1000) return entry_err(c, "dtype %llu is not a TensorFlow data type", (unsigned long long)dtype);
    e->dtype = (int)dtype;
    if (shard >= (uint64_t)num_shards)
        return entry_err(c, "shard_id %llu, but the bundle has %d shard%s", (unsigned long long)shard, num_shards,
                         num_shards == 1 ? "" : "s");
    if (offset > INT64_MAX / 2 || size > INT64_MAX / 2)
        return entry_err(c, "offset %llu or size %llu out of range", (unsigned long long)offset,
                         (unsigned long long)size);
    e->shard = (int32_t)shard;
    e->offset = (int64_t)offset;
    e->size = (int64_t)size;
    uint64_t numel = 1;
    int over = 0;
    for (int i = 0; i < e->ndim; i++) {
        uint64_t d = (uint64_t)e->shape[i];
        if (d && numel > UINT64_MAX / 4 / d) over = 1;
        else numel *= d;
    }
    int ds = dtype_size(e->dtype);
    if (over || numel > (uint64_t)INT64_MAX / 16) return entry_err(c, "shape has too many elements");
    e->numel = (int64_t)numel;
    if (ds && numel * (uint64_t)ds != size) {
        char sh[200];
        shape_str(sh, sizeof sh, e->ndim, e->shape);
        return entry_err(c, "shape %s of %s needs %llu bytes but the entry says size %llu", sh,
                         tfb_dtype_name(e->dtype, dn, sizeof dn), (unsigned long long)(numel * (uint64_t)ds),
                         (unsigned long long)size);
    }
    if (size && !e->has_crc) return entry_err(c, "no crc32c");
    return 0;
}

/* ---- the table ------------------------------------------------------------ */

typedef struct {
    uint64_t offset, size;
} handle;

typedef struct {
    const char *path;
    const unsigned char *buf;
    size_t len;
    /* the table's entries in order */
    char prev[TFB_MAX_KEY + 1];
    size_t prev_len;
    int have_prev;
    tfb_bundle *b;
    int cap;
} table;

static int decode_handle(const unsigned char **p, const unsigned char *end, handle *h)
{
    return varint(p, end, 10, &h->offset) || varint(p, end, 10, &h->size) ? -1 : 0;
}

/* The contents of a block after checking its handle, type and CRC. */
static int block_get(const table *t, const char *what, int idx, handle h, const unsigned char **data, size_t *size)
{
    size_t limit = t->len - FOOTER_LEN;
    char where[64];
    if (idx >= 0) snprintf(where, sizeof where, "%s %d", what, idx);
    else snprintf(where, sizeof where, "%s", what);
    if (h.offset > limit || h.size > limit - h.offset || BLOCK_TRAILER > limit - h.offset - h.size)
        return err_set(ERR_INPUT, "%s: %s at offset %llu, size %llu, lies outside the file's %zu bytes before the "
                       "footer (truncated?)", t->path, where, (unsigned long long)h.offset, (unsigned long long)h.size,
                       limit);
    const unsigned char *d = t->buf + h.offset;
    uint32_t want = crc_unmask(le32(d + h.size + 1));
    uint32_t got = crc32c(d, (size_t)h.size + 1);
    if (want != got && tfb_check_block_crc)
        return err_set(ERR_INPUT, "%s: %s at offset %llu: checksum mismatch (crc32c %08x, the block says %08x)",
                       t->path, where, (unsigned long long)h.offset, got, want);
    unsigned char type = d[h.size];
    if (type == 1)
        return err_set(ERR_INPUT, "%s: %s at offset %llu is Snappy-compressed, which bertc does not read (TensorFlow "
                       "writes uncompressed indexes by default)", t->path, where, (unsigned long long)h.offset);
    if (type != 0)
        return err_set(ERR_INPUT, "%s: %s at offset %llu: unknown compression type %u", t->path, where,
                       (unsigned long long)h.offset, type);
    *data = d;
    *size = (size_t)h.size;
    return 0;
}

/* Calls fn for every entry of a block, after checking the restart array,
 * every length and that restart points sit on entries with shared 0. */
typedef int (*entry_fn)(table *t, const char *key, size_t klen, const unsigned char *v, size_t vlen, void *arg);

static int block_walk(table *t, const char *what, int idx, handle h, entry_fn fn, void *arg)
{
    const unsigned char *d = NULL;
    size_t size = 0;
    int rc = block_get(t, what, idx, h, &d, &size);
    if (rc) return rc;
    char where[96];
    if (idx >= 0) snprintf(where, sizeof where, "%s %d at offset %llu", what, idx, (unsigned long long)h.offset);
    else snprintf(where, sizeof where, "%s at offset %llu", what, (unsigned long long)h.offset);
    if (size < 4) return err_set(ERR_INPUT, "%s: %s: %zu bytes, too short for a restart count", t->path, where, size);
    uint32_t nr = le32(d + size - 4);
    if (nr < 1 || nr > (size - 4) / 4)
        return err_set(ERR_INPUT, "%s: %s: %u restart points do not fit in %zu bytes", t->path, where, nr, size);
    size_t rstart = size - 4 - 4 * (size_t)nr;
    char key[TFB_MAX_KEY + 1];
    size_t klen = 0;
    const unsigned char *p = d, *end = d + rstart;
    uint32_t ri = 0;
    int n = 0;
    while (p < end) {
        size_t off = (size_t)(p - d);
        uint32_t r = ri < nr ? le32(d + rstart + 4 * ri) : UINT32_MAX;
        if (ri < nr && r < off)
            return err_set(ERR_INPUT, "%s: %s: restart point %u (offset %u) is not at an entry", t->path, where, ri, r);
        uint64_t shared, nonshared, vlen;
        if (varint(&p, end, 5, &shared) || varint(&p, end, 5, &nonshared) || varint(&p, end, 5, &vlen))
            return err_set(ERR_INPUT, "%s: %s: entry %d at byte %zu: truncated lengths", t->path, where, n, off);
        if (shared > klen)
            return err_set(ERR_INPUT, "%s: %s: entry %d shares %llu bytes of a %zu-byte previous key", t->path, where,
                           n, (unsigned long long)shared, klen);
        if (r == off) {
            if (shared)
                return err_set(ERR_INPUT, "%s: %s: entry %d at restart point %u shares %llu bytes (must be 0)",
                               t->path, where, n, ri, (unsigned long long)shared);
            ri++;
        }
        if (nonshared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - nonshared)
            return err_set(ERR_INPUT, "%s: %s: entry %d at byte %zu runs past the block's entries", t->path, where, n,
                           off);
        if (shared + nonshared > TFB_MAX_KEY)
            return err_set(ERR_INPUT, "%s: %s: entry %d: key of %llu bytes (at most %d)", t->path, where, n,
                           (unsigned long long)(shared + nonshared), TFB_MAX_KEY);
        memcpy(key + shared, p, (size_t)nonshared);
        klen = (size_t)(shared + nonshared);
        key[klen] = 0;
        p += nonshared;
        if ((rc = fn(t, key, klen, p, (size_t)vlen, arg))) return rc;
        p += vlen;
        n++;
    }
    /* An empty block (TF's metaindex) keeps its one restart point at 0. */
    if (n == 0 && nr == 1 && le32(d + rstart) == 0) return 0;
    if (ri != nr) {
        uint32_t r = le32(d + rstart + 4 * ri);
        return err_set(ERR_INPUT, "%s: %s: restart point %u (offset %u) is not at an entry", t->path, where, ri, r);
    }
    return 0;
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static int ignore_entry(table *t, const char *k, size_t kl, const unsigned char *v, size_t vl, void *arg)
{
    (void)t, (void)k, (void)kl, (void)v, (void)vl, (void)arg;
    return 0;
}

typedef struct {
    const char *sep; /* the index key: every key of the block is <= it */
    size_t sep_len;
    int block;
} data_arg;

static int bundle_entry(table *t, const char *key, size_t klen, const unsigned char *v, size_t vlen, void *arg)
{
    const data_arg *a = arg;
    tfb_bundle *b = t->b;
    /* TensorFlow's variable names are printable; a control byte (which would
     * also break a one-line message) means a damaged index. */
    for (size_t i = 0; i < klen; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return err_set(ERR_INPUT, "%s: data block %d: a key holds control byte 0x%02x at position %zu", t->path,
                           a->block, (unsigned char)key[i], i);
    if (t->have_prev && key_cmp(t->prev, t->prev_len, key, klen) >= 0)
        return err_set(ERR_INPUT, "%s: data block %d: key %.*s is not after the previous key %.*s (not sorted or "
                       "duplicate)", t->path, a->block, NAME_PRINT, key, NAME_PRINT, t->prev);
    if (key_cmp(key, klen, a->sep, a->sep_len) > 0)
        return err_set(ERR_INPUT, "%s: data block %d: key %.*s is after the block's index key %.*s", t->path, a->block,
                       NAME_PRINT, key, NAME_PRINT, a->sep);
    memcpy(t->prev, key, klen + 1);
    t->prev_len = klen;
    ctx c = {t->path, key};
    if (!t->have_prev) {
        t->have_prev = 1;
        if (klen) return err_set(ERR_INPUT, "%s: no bundle header (the first key is %.*s, not the empty key)",
                                 t->path, NAME_PRINT, key);
        return parse_header(&c, v, vlen, &b->num_shards);
    }
    if (b->n == MAX_ENTRIES) return err_set(ERR_INPUT, "%s: more than %d tensors", t->path, MAX_ENTRIES);
    if (b->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        b->entries = xrealloc(b->entries, (size_t)t->cap * sizeof *b->entries);
    }
    tfb_entry *e = &b->entries[b->n];
    memset(e, 0, sizeof *e);
    int rc = parse_entry(&c, v, vlen, b->num_shards, e);
    if (rc) return rc;
    e->name = xstrdup(key);
    b->n++;
    return 0;
}

typedef struct {
    handle *h;
    char **sep;
    size_t *sep_len;
    int n, cap;
} index_list;

static int index_entry(table *t, const char *key, size_t klen, const unsigned char *v, size_t vlen, void *arg)
{
    index_list *l = arg;
    if (l->n && key_cmp(l->sep[l->n - 1], l->sep_len[l->n - 1], key, klen) >= 0)
        return err_set(ERR_INPUT, "%s: index block: key %d is not after the previous one", t->path, l->n);
    for (size_t i = 0; i < klen; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return err_set(ERR_INPUT, "%s: index block: key %d holds control byte 0x%02x", t->path, l->n,
                           (unsigned char)key[i]);
    const unsigned char *p = v, *end = v + vlen;
    handle h;
    if (decode_handle(&p, end, &h) || p != end)
        return err_set(ERR_INPUT, "%s: index block: entry %d is not a block handle", t->path, l->n);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->h = xrealloc(l->h, (size_t)l->cap * sizeof *l->h);
        l->sep = xrealloc(l->sep, (size_t)l->cap * sizeof *l->sep);
        l->sep_len = xrealloc(l->sep_len, (size_t)l->cap * sizeof *l->sep_len);
    }
    /* Data blocks follow each other: no overlap, in file order. */
    if (l->n && h.offset < l->h[l->n - 1].offset + l->h[l->n - 1].size + BLOCK_TRAILER)
        return err_set(ERR_INPUT, "%s: index block: data block %d at offset %llu overlaps or precedes block %d",
                       t->path, l->n, (unsigned long long)h.offset, l->n - 1);
    l->h[l->n] = h;
    l->sep[l->n] = xmalloc(klen + 1);
    memcpy(l->sep[l->n], key, klen + 1);
    l->sep_len[l->n] = klen;
    l->n++;
    (void)t;
    return 0;
}

void tfb_close(tfb_bundle *b)
{
    for (int i = 0; i < b->n; i++) free(b->entries[i].name);
    free(b->entries);
    free(b->index_path);
    free(b->prefix);
    free(b->shard_size);
    memset(b, 0, sizeof *b);
}

int tfb_parse_index(const char *path, const unsigned char *buf, size_t len, tfb_bundle *b)
{
    memset(b, 0, sizeof *b);
    if (len < FOOTER_LEN)
        return err_set(ERR_INPUT, "%s: %zu bytes, shorter than the %d-byte table footer (truncated?)", path, len,
                       FOOTER_LEN);
    const unsigned char *foot = buf + len - FOOTER_LEN;
    if (le64(foot + 40) != TABLE_MAGIC)
        return err_set(ERR_INPUT, "%s: bad magic %016llx in the table footer (not a TensorFlow checkpoint index, or "
                       "truncated)", path, (unsigned long long)le64(foot + 40));
    const unsigned char *p = foot, *fend = foot + 40;
    handle meta, index;
    if (decode_handle(&p, fend, &meta) || decode_handle(&p, fend, &index))
        return err_set(ERR_INPUT, "%s: table footer: malformed block handles", path);
    table t = {.path = path, .buf = buf, .len = len, .b = b};
    index_list l = {0};
    int rc = block_walk(&t, "metaindex block", -1, meta, ignore_entry, NULL);
    if (!rc) rc = block_walk(&t, "index block", -1, index, index_entry, &l);
    if (!rc && l.n == 0) rc = err_set(ERR_INPUT, "%s: the index block lists no data blocks", path);
    for (int i = 0; i < l.n && !rc; i++) {
        data_arg a = {l.sep[i], l.sep_len[i], i};
        rc = block_walk(&t, "data block", i, l.h[i], bundle_entry, &a);
    }
    if (!rc && !t.have_prev) rc = err_set(ERR_INPUT, "%s: no bundle header (the table is empty)", path);
    for (int i = 0; i < l.n; i++) free(l.sep[i]);
    free(l.h);
    free(l.sep);
    free(l.sep_len);
    if (!rc) {
        b->index_path = xstrdup(path);
        return 0;
    }
    tfb_close(b);
    return rc;
}

const tfb_entry *tfb_find(const tfb_bundle *b, const char *name)
{
    int lo = 0, hi = b->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(b->entries[mid].name, name);
        if (!c) return &b->entries[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static void shard_path(const tfb_bundle *b, int shard, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.data-%05d-of-%05d", b->prefix, shard, b->num_shards);
}

int tfb_open(const char *prefix, tfb_bundle *b)
{
    memset(b, 0, sizeof *b);
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s.index", prefix) >= sizeof path)
        return err_set(ERR_INPUT, "%s: path too long", prefix);
    char *buf;
    size_t len;
    int rc = file_read_all(path, &buf, &len);
    if (rc) return rc;
    rc = tfb_parse_index(path, (const unsigned char *)buf, len, b);
    free(buf);
    if (rc) return rc;
    b->prefix = xstrdup(prefix);
    b->shard_size = xcalloc((size_t)b->num_shards, sizeof *b->shard_size);
    for (int s = 0; s < b->num_shards; s++) {
        struct stat st;
        shard_path(b, s, path, sizeof path);
        if (stat(path, &st) != 0) {
            rc = err_set(ERR_INPUT, "%s: %s (data shard %d of %d of %s.index)", path,
                         errno == ENOENT ? "missing" : strerror(errno), s, b->num_shards, prefix);
            break;
        }
        if (!S_ISREG(st.st_mode)) {
            rc = err_set(ERR_INPUT, "%s: not a regular file", path);
            break;
        }
        b->shard_size[s] = (int64_t)st.st_size;
    }
    for (int i = 0; i < b->n && !rc; i++) {
        const tfb_entry *e = &b->entries[i];
        int64_t ss = b->shard_size[e->shard];
        if (e->offset > ss || e->size > ss - e->offset) {
            shard_path(b, e->shard, path, sizeof path);
            rc = err_set(ERR_INPUT, "%s: tensor %.*s: bytes [%lld, %lld) lie outside the file's %lld bytes "
                         "(truncated shard?)", path, NAME_PRINT, e->name, (long long)e->offset,
                         (long long)(e->offset + e->size), (long long)ss);
        }
    }
    if (rc) tfb_close(b);
    return rc;
}

int tfb_read_f32(const tfb_bundle *b, const tfb_entry *e, float *out, size_t n)
{
    char path[4096], dn[32];
    if (!b->prefix) return err_set(ERR_RUNTIME, "%s: tfb_read_f32 needs tfb_open", b->index_path);
    shard_path(b, e->shard, path, sizeof path);
    if ((uint64_t)e->numel != n)
        return err_set(ERR_INPUT, "%s: tensor %.*s: holds %lld elements, %zu expected", path, NAME_PRINT, e->name,
                       (long long)e->numel, n);
    int ds = dtype_size(e->dtype);
    if (e->dtype != TFB_DT_FLOAT && e->dtype != TFB_DT_HALF && e->dtype != TFB_DT_BFLOAT16 && e->dtype != TFB_DT_DOUBLE)
        return err_set(ERR_INPUT, "%s: tensor %.*s: dtype %s is not a float type", path, NAME_PRINT, e->name,
                       tfb_dtype_name(e->dtype, dn, sizeof dn));
    unsigned char *buf = e->dtype == TFB_DT_FLOAT ? (unsigned char *)out : malloc((size_t)e->size ? (size_t)e->size : 1);
    if (!buf) return err_set(ERR_RUNTIME, "%s: out of memory for %lld bytes", path, (long long)e->size);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0) rc = err_set(ERR_INPUT, "%s: %s", path, strerror(errno));
    size_t got = 0;
    while (!rc && got < (size_t)e->size) {
        ssize_t r = pread(fd, buf + got, (size_t)e->size - got, (off_t)(e->offset + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = err_set(ERR_INPUT, "%s: tensor %.*s: %s at byte %lld", path, NAME_PRINT, e->name,
                         r < 0 ? strerror(errno) : "unexpected end of file", (long long)(e->offset + (int64_t)got));
            break;
        }
        got += (size_t)r;
    }
    if (fd >= 0) close(fd);
    if (!rc) {
        uint32_t c = crc32c(buf, (size_t)e->size);
        if (c != e->crc32c)
            rc = err_set(ERR_INPUT, "%s: tensor %.*s: checksum mismatch in bytes [%lld, %lld) (crc32c %08x, the index "
                         "says %08x)", path, NAME_PRINT, e->name, (long long)e->offset,
                         (long long)(e->offset + e->size), c, e->crc32c);
    }
    if (!rc && e->dtype != TFB_DT_FLOAT) {
        for (size_t i = 0; i < n; i++) {
            if (e->dtype == TFB_DT_DOUBLE) {
                double d;
                memcpy(&d, buf + 8 * i, 8);
                out[i] = (float)d;
            } else {
                uint16_t h;
                memcpy(&h, buf + 2 * i, 2);
                out[i] = e->dtype == TFB_DT_HALF ? f16_to_float(h) : bf16_to_float(h);
            }
        }
    }
    (void)ds;
    if (buf != (unsigned char *)out) free(buf);
    return rc;
}
