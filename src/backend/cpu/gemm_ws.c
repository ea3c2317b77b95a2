/* The GEMMs' per-thread working memory (see gemm_ws.h). */
#include "backend/cpu/gemm_ws.h"

#include <pthread.h>
#include <stdlib.h>

struct gemm_ws {
    void *p;
    size_t bytes;
};

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_free(void *v)
{
    struct gemm_ws *w = v;
    free(w->p);
    free(w);
}

static void ws_init(void)
{
    ws_key_ok = pthread_key_create(&ws_key, ws_free) == 0;
}

void *gemm_ws_get(size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    pthread_once(&ws_once, ws_init);
    if (!ws_key_ok) return NULL;
    struct gemm_ws *w = pthread_getspecific(ws_key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) return NULL;
        if (pthread_setspecific(ws_key, w) != 0) {
            free(w);
            return NULL;
        }
    }
    if (w->bytes < bytes) {
        free(w->p);
        w->p = aligned_alloc(64, bytes);
        w->bytes = w->p ? bytes : 0;
    }
    return w->p;
}
