/* SQuAD-format data sets (v1.1; v2.0 accepted), read with Jansson.
 *
 * Texts are UTF-8. Answer starts are code point offsets into the context, as
 * in the file (SQuAD counts Python string indices). An answer whose
 * answer_start does not point at its text is moved to the nearest occurrence
 * of the text (by code point distance; ties: the earlier one), or, when there
 * is none (or the text is empty), left out of training; both are counted in
 * n_relocated / n_unfound (per answer) and reported once by the caller.
 * CMRC 2018 trial has 5 such answers, all one code point too far: relocated.
 *
 * Required fields: data[].paragraphs[].context and .qas[], each qa's id
 * (string, unique in the file), question and answers[] (text, answer_start
 * an integer); is_impossible (v2.0) is optional; other fields are ignored. */
#ifndef BERTC_SQUAD_H
#define BERTC_SQUAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *text;       /* the paragraph, UTF-8 */
    size_t nbytes;
    int ncp;          /* length in code points */
    int32_t *cp_byte; /* [ncp + 1]: byte offset of each code point */
} squad_context;

typedef struct {
    char *id;
    char *question;
    int context;        /* index into squad_data.contexts */
    int n_answers;
    char **answer_text;
    int *answer_start;  /* code points, after relocation; -1 when not found */
    int is_impossible;  /* v2.0 */
    int train_answer;   /* the answer used as training label (first usable), -1 when none */
} squad_example;

typedef struct {
    char *version;       /* the file's "version", or "" */
    squad_example *ex;
    int n;
    squad_context *contexts;
    int ncontexts;
    int n_relocated, n_unfound;
    uint64_t hash;       /* hash of the file's bytes (features cache key) */
} squad_data;

/* Errors name the file and line:column (JSON syntax) or the question id and
 * the field (missing or mistyped fields); ERR_INPUT. */
int squad_load(const char *path, squad_data *out);
void squad_free(squad_data *d);

#endif
