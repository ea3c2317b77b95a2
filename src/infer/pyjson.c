/* JSON as Python's json.dumps writes it (see pyjson.h). */
#include "infer/pyjson.h"

#include "eval/pytext.h"

void pyjson_float(sbuf *b, double x)
{
    char s[40];
    pytext_float_repr(x, s, sizeof s);
    sb_puts(b, s);
}
