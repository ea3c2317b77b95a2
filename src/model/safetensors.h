/* safetensors files: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}, then the data. The reader mmaps the file and checks
 * everything against the file size before any tensor is touched. Every
 * error message reads "FILE: tensor NAME: what is wrong" (or "FILE: what is
 * wrong" for the file as a whole). Little-endian hosts only, as the format. */
#ifndef BERTC_SAFETENSORS_H
#define BERTC_SAFETENSORS_H

#include "model/params.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_F16, ST_BF16, ST_I32, ST_I64 } st_dtype;

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[8];
    size_t numel;
    const void *data; /* inside the mapping; not necessarily aligned */
    size_t nbytes;
} st_tensor;

typedef struct {
    char *path;
    void *map;
    size_t map_len;
    st_tensor *tensors;
    int n;
} st_file;

/* Opens and validates: header length within the file, valid JSON, known
 * dtypes (others: ERR_INPUT naming the tensor and the dtype), shape x dtype
 * size = byte range, ranges inside the data area, no overlaps, no gaps and
 * no trailing bytes (as the safetensors library requires), no duplicate
 * names. */
int st_open(const char *path, st_file *f);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
/* Converts a float tensor (F32, F16 or BF16) to fp32; n must equal numel. */
int st_read_f32(const st_file *f, const st_tensor *t, float *out, size_t n);
/* Converts an integer tensor (I32 or I64) to int64; n must equal numel. */
int st_read_i64(const st_file *f, const st_tensor *t, int64_t *out, size_t n);
const char *st_dtype_name(st_dtype d);

/* Writer: tensors are given as fp32 (ST_F32) or int32 (ST_I32) host arrays. */
typedef struct {
    const char *name;
    st_dtype dtype; /* ST_F32 or ST_I32 */
    int ndim;
    int64_t shape[8];
    const void *data;
} st_entry;
/* Writes atomically (temp file, fsync, rename) unless sync_only, in which
 * case it writes PATH in place and fsyncs it (for files inside a temp dir). */
int st_write(const char *path, const st_entry *entries, int n, int sync_only);
/* The table's tensors, F32 under their transformers names in table order,
 * written atomically: a model dir's model.safetensors. */
int st_write_params(const char *path, const param_table *t, const float *block);

#endif
