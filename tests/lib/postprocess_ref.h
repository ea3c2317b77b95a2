/* The binary reference files of tools/postprocess_ref.py (SQuAD 1.1) and
 * tools/postprocess_v2_ref.py (SQuAD 2.0), read for test_postprocess.c and
 * test_postprocess_squad2.c: little-endian fields, strings with a u16
 * length. A file holds a header, the examples' ids, the features (offsets
 * and logits), then the expected predictions, which each test reads itself
 * with the rd_ functions. */
#ifndef BERTC_TESTS_POSTPROCESS_REF_H
#define BERTC_TESTS_POSTPROCESS_REF_H

#include "data/features.h"
#include "data/squad.h"
#include "infer/predict.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A cursor over the file; bad is set (and stays set) once a read runs past the end. */
typedef struct {
    const unsigned char *p, *end;
    int bad;
} ppref_reader;

/* n bytes, or NULL past the end. The numbers read 0 and the string "" past the end. */
const void *rd_take(ppref_reader *r, size_t n);
uint16_t rd_u16(ppref_reader *r);
uint32_t rd_u32(ppref_reader *r);
uint64_t rd_u64(ppref_reader *r);
float rd_f32(ppref_reader *r);
double rd_f64(ppref_reader *r);
/* A malloc'ed NUL-terminated copy. */
char *rd_str(ppref_reader *r);

/* Fills a context from its text (the code point offsets included). */
void ppref_set_context(squad_context *c, const char *text);
/* The hand cases' data: the context "ab cd é f" and the examples "x" and
 * y_id on it (d points into the struct: keep it where it is; free c's
 * text and cp_byte). */
typedef struct {
    squad_context c;
    squad_example ex[2];
    squad_data d;
} ppref_hand;
void ppref_hand_init(ppref_hand *h, const char *y_id);
/* Question id -> context string of every question in a SQuAD file (a new
 * reference); a counted failure when the file does not load. */
json_t *ppref_contexts(const char *squad_path);

typedef struct {
    char *buf;                 /* the whole file */
    ppref_reader r;            /* after the features: the expected predictions */
    int ne, nf, T, n_best, max_len;
    int nt;                    /* SQuAD 2.0: thresholds in thr (1 to 8); else 0 */
    double thr[8];
    squad_data d;              /* the ids from the file, their contexts from `contexts` */
    features f;                /* example and offsets from the file */
    float *start_logits, *end_logits;
} ppref;

/* Reads tests/ref/postprocess/NAME up to the expected predictions: checks
 * the magic (of the SQuAD 2.0 format when squad2), the thresholds and that
 * every id is in contexts (called `source` in a message), one counted check
 * each. Returns 0, or -1 (a counted failure) when the file cannot be read. */
int ppref_read(ppref *ref, const char *name, int squad2, json_t *contexts, const char *source);
void ppref_free(ppref *ref);
/* postprocess_predictions of the file's windows and logits with its n_best
 * and max_answer_length (the rest of po: the caller's). */
int ppref_predict(const ppref *ref, const postprocess_opts *po, qa_predictions *p);
/* hash64 of a written file's bytes, their count in *len (0 and 0 when it
 * cannot be read). */
uint64_t ppref_file_hash(const char *path, size_t *len);

/* How the n-best lists differ from the reference's, summed over examples. */
typedef struct {
    int nbest_bad;             /* examples with another number of entries */
    int order_bad;             /* entries of another text, start or end logit */
    int n_answers;             /* entries compared */
    int n_null_entries;        /* of them, null answers (empty text) */
    double max_score, max_prob; /* the largest |difference| of a score, of a probability */
} ppref_nbest_diff;
/* Reads example i's n-best list (its length, then per entry score, start
 * and end logit, probability and the text's hash64) and compares p's with
 * it, adding to diff; the first 5 differences of each kind go to stderr,
 * under name. */
void ppref_compare_nbest(ppref_reader *r, const char *name, const qa_predictions *p, int i, ppref_nbest_diff *diff);

typedef int (*ppref_writer)(const char *path, const squad_data *d, const qa_predictions *p);
/* Writes p with write (predictions_write_json and its kin) to NAME in the
 * test's temp dir and checks that the file holds want to the byte, one
 * counted check each; what names the file in the message. */
void ppref_check_written(ppref_writer write, const char *name, const char *what, const squad_data *d,
                         const qa_predictions *p, const char *want);

#endif
