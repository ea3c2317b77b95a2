/* Tensor shapes in messages (see shape.h). */
#include "core/shape.h"

#include <stdio.h>

char *shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    if (!cap) return buf;
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}
