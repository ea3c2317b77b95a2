/* Python 3 string semantics that the official evaluation scripts rely on.
 *
 * evaluate-v1.1.py runs under Python 3, whose str.lower(), str.split() and
 * re's \b are Unicode-aware. These reproduce CPython 3.11 (Unicode 14.0):
 * utf8proc supplies categories and simple case mappings, and the few places
 * where Python differs from them (full lower-casing of U+0130, the final
 * sigma rule, code points utf8proc knows from a newer Unicode) are handled
 * here. Checked against Python over every code point by tests/eval/test_eval.c.
 *
 * Strings are UTF-8 with an explicit length (they may hold NUL). A byte that
 * is not valid UTF-8 decodes as U+FFFD; JSON loaded by Jansson never has one. */
#ifndef BERTC_PYTEXT_H
#define BERTC_PYTEXT_H

#include <stddef.h>
#include <stdint.h>

/* A decoded string: code points, growable. */
typedef struct {
    int32_t *cp;
    size_t n, cap;
} pytext_cps;

void pytext_decode(const char *s, size_t n, pytext_cps *out); /* appends */
void pytext_push(pytext_cps *t, int32_t cp);
void pytext_cps_free(pytext_cps *t);
/* UTF-8 of t, NUL-terminated, length in *len (may be NULL). Caller frees. */
char *pytext_encode(const pytext_cps *t, size_t *len);

/* str.isspace(): what str.split() with no argument splits on. */
int pytext_isspace(int32_t cp);
/* re's \w for str patterns: Unicode letters and numbers, and '_'. */
int pytext_isword(int32_t cp);
/* re's \d for str patterns: Unicode decimal digits (Nd). */
int pytext_isdecimal(int32_t cp);
/* Python 3 str.lower() of in (full case mapping, final sigma) into out. */
void pytext_lower(const pytext_cps *in, pytext_cps *out);
/* Python 2 unicode.lower(): simple case mapping only (cmrc2018_evaluate.py). */
int32_t pytext_lower_simple(int32_t cp);

/* repr(float) as Python writes it (and json.dumps): the shortest string that
 * reads back as x; fixed notation for 1e-4 <= |x| < 1e16 ("100.0"), else
 * scientific ("1e-05", "1.5e+16"); "NaN", "Infinity", "-Infinity" as
 * json.dumps writes them. buf needs 32 bytes; returns the length. */
int pytext_float_repr(double x, char *buf, size_t cap);

#endif
