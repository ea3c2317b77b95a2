#include "model/load_check.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int load_check_finite(const char *path, const char *name, const float *x, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!isfinite(x[k]))
            return err_set(ERR_INPUT, "%s: tensor %s: element %zu is %g (not finite)", path, name, k, (double)x[k]);
    return 0;
}

void load_log_unused(const char *path, int n, const unsigned char *used, int (*ignored)(const char *name),
                     const char *(*name)(const void *ctx, int i), const void *ctx)
{
    int unknown = 0;
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        if (used[i] || ignored(name(ctx, i))) continue;
        if (unknown++ < 3) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%.60s", l ? ", " : "", name(ctx, i));
        }
    }
    if (unknown)
        log_info("%s: ignoring %d tensor%s bertc does not use (%s%s)", path, unknown, unknown == 1 ? "" : "s", list,
                 unknown > 3 ? ", ..." : "");
}

int load_finish(int rc, const bert_config *c, float *b, param_table *t, bert_config *cfg, float **block)
{
    if (rc) {
        free(b);
        param_table_free(t);
        return rc;
    }
    *cfg = *c;
    *block = b;
    return 0;
}
