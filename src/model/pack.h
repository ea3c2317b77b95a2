/* The packing rule: how windows go into packed micro-batches (pieces) and
 * rows (bert.h's packed bert_batch). Training (train/step.c, a pipeline
 * stage's units), prediction (infer/qa_model.c) and serve (serve_batch.c)
 * all ask it, so that a piece cut here is the piece every one of them
 * runs.
 *
 *   A window's real tokens are the leading positions of its padded row
 *   whose attention mask is 1 (pack_window_len).
 *   A piece takes windows in the order given while its tokens stay within
 *   the budget (max_tokens) and its windows within max_windows; it always
 *   takes at least one, so a list of n windows is cut into pieces that
 *   follow one another and cover it (pack_cut).
 *   Training keeps the micro-batch's order; prediction first sorts the
 *   windows by length (pack_sort_by_length, stable), so that windows of
 *   one length share pieces.
 *   In a piece, window j is rows cu[j] .. cu[j+1] - 1 (pack_rows), and its
 *   logits go back to its padded row with -inf at the padding
 *   (pack_unpack_row), as `bertc predict --packing varlen` writes them.
 *
 *   int len[B];
 *   pack_lengths(mask, T, NULL, B, len);
 *   for (int r0 = 0, n; r0 < B; r0 += n) {
 *       n = pack_cut(len + r0, B - r0, 0, max_tokens, NULL);
 *       pack_piece(in_ids + r0 * T, in_types + r0 * T, NULL, T, NULL, len + r0, n, ids, types, cu);
 *       bert_batch b = {n, T, ids, types, NULL, ..., cu, 0};
 *       ...
 *   }
 */
#ifndef BERTC_PACK_H
#define BERTC_PACK_H

#include <stdint.h>

/* Real tokens of a padded window: its leading mask ones (0 to T). */
int pack_window_len(const int32_t *mask, int T);
/* len[i] = the real tokens of window rows[i] (rows NULL: window i) of a
 * padded table whose window w is mask[w * T .. w * T + T). */
void pack_lengths(const int32_t *mask, int T, const int32_t *rows, int n, int *len);

/* How many of the windows whose lengths are len[0 .. n) go into the next
 * piece: the first, then each next one while the piece stays within
 * max_tokens tokens and max_windows windows (0: no limit). *tokens (may be
 * NULL): the piece's tokens. 0 when n <= 0. */
int pack_cut(const int *len, int n, int max_windows, int64_t max_tokens, int64_t *tokens);

/* order[0 .. n): the windows 0 .. n - 1 by length (0 to T), shortest first,
 * equal lengths in their order. ERR_RUNTIME when out of memory. */
int pack_sort_by_length(const int *len, int n, int T, int32_t *order);

/* The rows of one piece, filled window by window: ids and types get each
 * window's real tokens one after another, cu (room for windows + 1) their
 * offsets, cu[0] = 0. */
typedef struct {
    int32_t *ids, *types, *cu;
    int n;      /* windows so far */
    int tokens; /* rows so far: cu[n] */
} pack_rows;

pack_rows pack_rows_begin(int32_t *ids, int32_t *types, int32_t *cu);
/* Appends a window's first len tokens (ids, types: its padded row). */
void pack_rows_add(pack_rows *p, const int32_t *ids, const int32_t *types, int len);

/* One piece from a padded table (window w's tokens at ids + w * T, types +
 * w * T, mask + w * T): windows rows[0 .. n) (rows NULL: 0 .. n - 1), of
 * lengths len[0 .. n) (len NULL: pack_window_len of their masks), packed
 * into out_ids, out_types and cu. Returns its tokens. */
int pack_piece(const int32_t *ids, const int32_t *types, const int32_t *mask, int T, const int32_t *rows,
               const int *len, int n, int32_t *out_ids, int32_t *out_types, int32_t *cu);

/* A packed window's len logits back to its padded row of T: the real
 * positions copied, the padding -inf. */
void pack_unpack_row(const float *packed, int len, int T, float *row);

#endif
