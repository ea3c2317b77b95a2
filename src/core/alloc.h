/* Checked allocation for small, bounded allocations (names, tables, lists):
 * running out of memory there is not recoverable, so these print and abort.
 * Large allocations sized by input (tensors, files) use malloc directly and
 * report ERR_RUNTIME with err_set() instead. */
#ifndef BERTC_ALLOC_H
#define BERTC_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* a * b, or SIZE_MAX when it would overflow (then any allocation fails):
 * core/sat.h's sat_mul, by the name the allocations use (out of line, so
 * that the compiler does not see a SIZE_MAX reach malloc and warn). */
size_t mul_size(size_t a, size_t b);

#endif
