#include "alloc.h"

#include "sat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die_oom(size_t n)
{
    fprintf(stderr, "bertc: out of memory (allocating %zu bytes)\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die_oom(n);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die_oom(mul_size(count, size));
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) die_oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

size_t mul_size(size_t a, size_t b)
{
    return sat_mul(a, b);
}
