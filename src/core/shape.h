/* Tensor shapes in messages. */
#ifndef BERTC_SHAPE_H
#define BERTC_SHAPE_H

#include <stddef.h>
#include <stdint.h>

/* shape[0..ndim) as "[2, 3]" ("[]" for ndim 0) into buf, cut short to fit
 * cap bytes (NUL included); returns buf. */
char *shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

#endif
