/* The packing rule (pack.h). */
#include "model/pack.h"

#include "core/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int pack_window_len(const int32_t *mask, int T)
{
    int n = 0;
    while (n < T && mask[n] == 1) n++;
    return n;
}

void pack_lengths(const int32_t *mask, int T, const int32_t *rows, int n, int *len)
{
    for (int i = 0; i < n; i++) len[i] = pack_window_len(mask + (size_t)(rows ? rows[i] : i) * (size_t)T, T);
}

int pack_cut(const int *len, int n, int max_windows, int64_t max_tokens, int64_t *tokens)
{
    int k = 0;
    int64_t N = 0;
    while (k < n && (k == 0 || ((max_windows <= 0 || k < max_windows) && N + len[k] <= max_tokens))) N += len[k++];
    if (tokens) *tokens = N;
    return k;
}

int pack_sort_by_length(const int *len, int n, int T, int32_t *order)
{
    int *count = calloc((size_t)T + 2, sizeof *count);
    if (!count) return err_set(ERR_RUNTIME, "out of memory for sorting %d windows by length", n);
    /* a counting sort: stable, and linear in the windows */
    for (int i = 0; i < n; i++) count[len[i] + 1]++;
    for (int l = 1; l <= T + 1; l++) count[l] += count[l - 1];
    for (int i = 0; i < n; i++) order[count[len[i]]++] = i;
    free(count);
    return 0;
}

pack_rows pack_rows_begin(int32_t *ids, int32_t *types, int32_t *cu)
{
    cu[0] = 0;
    return (pack_rows){ids, types, cu, 0, 0};
}

void pack_rows_add(pack_rows *p, const int32_t *ids, const int32_t *types, int len)
{
    memcpy(p->ids + p->tokens, ids, (size_t)len * sizeof *p->ids);
    memcpy(p->types + p->tokens, types, (size_t)len * sizeof *p->types);
    p->tokens += len;
    p->cu[++p->n] = p->tokens;
}

int pack_piece(const int32_t *ids, const int32_t *types, const int32_t *mask, int T, const int32_t *rows,
               const int *len, int n, int32_t *out_ids, int32_t *out_types, int32_t *cu)
{
    pack_rows p = pack_rows_begin(out_ids, out_types, cu);
    for (int j = 0; j < n; j++) {
        size_t at = (size_t)(rows ? rows[j] : j) * (size_t)T;
        pack_rows_add(&p, ids + at, types + at, len ? len[j] : pack_window_len(mask + at, T));
    }
    return p.tokens;
}

void pack_unpack_row(const float *packed, int len, int T, float *row)
{
    memcpy(row, packed, (size_t)len * sizeof *row);
    for (int t = len; t < T; t++) row[t] = -INFINITY;
}
