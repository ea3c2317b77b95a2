/* NumPy .npy files (format version 1.0), int32 and float32, C order.
 *
 * `--dump DIR` writes these so every stage can be checked with
 * numpy.load() against an outside implementation. Writes go to PATH.tmp.<pid>
 * and are renamed into place, so a reader never sees half a file. The
 * reader is for tests and tools: it accepts what npy_write writes (and any
 * little-endian '<i4' / '<f4' C-order file with a version 1.0 header). */
#ifndef BERTC_NPY_H
#define BERTC_NPY_H

#include <stdint.h>

typedef enum {
    NPY_I32,
    NPY_F32,
} npy_dtype;

#define NPY_MAX_DIMS 8

/* shape[0..ndim) (ndim 0 = a scalar); data holds prod(shape) elements. */
int npy_write(const char *path, npy_dtype dtype, const void *data, int ndim, const int64_t *shape);
static inline int npy_write_i32(const char *path, const int32_t *data, int ndim, const int64_t *shape)
{
    return npy_write(path, NPY_I32, data, ndim, shape);
}
static inline int npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape)
{
    return npy_write(path, NPY_F32, data, ndim, shape);
}

/* Reads a whole file; *data is malloc'ed (free it). Errors (ERR_INPUT) name
 * the file and what is wrong with it. */
int npy_read(const char *path, npy_dtype *dtype, int *ndim, int64_t shape[NPY_MAX_DIMS], void **data);

#endif
