/* What every backend shares: freeing through the table. */
#include "backend/backend.h"

#include <stddef.h>

void backend_free(backend *b)
{
    if (!b) return;
    if (b->i && b->i->free) b->i->free(b->ctx);
    b->i = NULL;
    b->ctx = NULL;
}
