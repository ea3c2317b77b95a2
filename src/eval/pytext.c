/* Python 3.11 string semantics on top of utf8proc (see pytext.h). */
#include "eval/pytext.h"

#include "core/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void pytext_push(pytext_cps *t, int32_t cp)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 32;
        t->cp = xrealloc(t->cp, t->cap * sizeof *t->cp);
    }
    t->cp[t->n++] = cp;
}

void pytext_cps_free(pytext_cps *t)
{
    free(t->cp);
    t->cp = NULL;
    t->n = t->cap = 0;
}

void pytext_decode(const char *s, size_t n, pytext_cps *out)
{
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            cp = 0xFFFD;
            k = 1;
        }
        pytext_push(out, cp);
        i += (size_t)k;
    }
}

char *pytext_encode(const pytext_cps *t, size_t *len)
{
    char *s = xmalloc(mul_size(t->n, 4) + 1);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) k += (size_t)utf8proc_encode_char(t->cp[i], (utf8proc_uint8_t *)s + k);
    s[k] = 0;
    if (len) *len = k;
    return s;
}

int pytext_isspace(int32_t cp)
{
    /* Py_UNICODE_ISSPACE: bidi class WS, B or S, or category Zs. Not U+180E,
     * U+200B or U+FEFF (they are not whitespace since Unicode 6.3). */
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* Code points that utf8proc 2.8 (Unicode 15.0) assigns and CPython 3.11's
 * Unicode 14.0 database does not: Python sees them as unassigned (Cn). */
static const int32_t unicode15_new[][2] = {
    {0xCF3, 0xCF3}, {0xECE, 0xECE}, {0x10EFD, 0x10EFF}, {0x1123F, 0x11241}, {0x11B00, 0x11B09},
    {0x11F00, 0x11F10}, {0x11F12, 0x11F3A}, {0x11F3E, 0x11F59}, {0x1342F, 0x1342F}, {0x13439, 0x13455},
    {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1D2C0, 0x1D2D3}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D},
    {0x1E08F, 0x1E08F}, {0x1E4D0, 0x1E4F9}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F},
    {0x1F7D9, 0x1F7D9}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA88}, {0x1FAAD, 0x1FAAF}, {0x1FABB, 0x1FABD},
    {0x1FABF, 0x1FABF}, {0x1FACE, 0x1FACF}, {0x1FADA, 0x1FADB}, {0x1FAE8, 0x1FAE8}, {0x1FAF7, 0x1FAF8},
    {0x2B739, 0x2B739}, {0x31350, 0x323AF},
};

static int category(int32_t cp)
{
    if (cp < 0 || cp > 0x10FFFF) return UTF8PROC_CATEGORY_CN;
    if (cp >= 0xCF3) {
        int lo = 0, hi = (int)(sizeof unicode15_new / sizeof unicode15_new[0]) - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (cp < unicode15_new[mid][0]) hi = mid - 1;
            else if (cp > unicode15_new[mid][1]) lo = mid + 1;
            else return UTF8PROC_CATEGORY_CN;
        }
    }
    return utf8proc_category(cp);
}

int pytext_isword(int32_t cp)
{
    /* SRE's Unicode word class is str.isalnum() or '_'; over Unicode 14 that
     * is exactly the L* and N* categories (checked over all code points). */
    if (cp == '_') return 1;
    int c = category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

int pytext_isdecimal(int32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return category(cp) == UTF8PROC_CATEGORY_ND;
}

/* Unicode Case_Ignorable: Mn, Me, Cf, Lm, Sk and Word_Break MidLetter,
 * MidNumLet and Single_Quote. */
static int case_ignorable(int32_t cp)
{
    switch (cp) {
    case '\'': case '.': case ':': case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018: case 0x2019:
    case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
        return 1;
    default:
        break;
    }
    int c = category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_ME || c == UTF8PROC_CATEGORY_CF ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_SK;
}

/* Unicode Cased: Lu, Ll, Lt, Other_Lowercase, Other_Uppercase. The Other_*
 * ones that have no case mapping are listed; the rest are caught by having
 * one (checked against Python over all code points). */
static int cased(int32_t cp)
{
    int c = category(cp);
    if (c == UTF8PROC_CATEGORY_CN) return 0;
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return 1;
    if (cp == 0xAA || cp == 0xBA) return 1;
    if ((cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return 1;
    return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
}

/* Final_Sigma (CPython's handle_capital_sigma): U+03A3 lowers to U+03C2
 * when a cased letter precedes it and none follows, skipping case-ignorable
 * code points on both sides. */
static int final_sigma(const pytext_cps *in, size_t i)
{
    size_t j = i;
    int32_t c = 0;
    while (j > 0) {
        c = in->cp[--j];
        if (!case_ignorable(c)) break;
        if (j == 0) return 0;
    }
    if (i == 0 || case_ignorable(c) || !cased(c)) return 0;
    for (j = i + 1; j < in->n; j++) {
        c = in->cp[j];
        if (!case_ignorable(c)) return !cased(c);
    }
    return 1;
}

void pytext_lower(const pytext_cps *in, pytext_cps *out)
{
    for (size_t i = 0; i < in->n; i++) {
        int32_t cp = in->cp[i];
        if (cp < 0x80) {
            pytext_push(out, cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        } else if (cp == 0x130) {
            /* the one unconditional multi-code-point lower mapping */
            pytext_push(out, 'i');
            pytext_push(out, 0x307);
        } else if (cp == 0x3A3) {
            pytext_push(out, final_sigma(in, i) ? 0x3C2 : 0x3C3);
        } else {
            pytext_push(out, category(cp) == UTF8PROC_CATEGORY_CN ? cp : utf8proc_tolower(cp));
        }
    }
}

int32_t pytext_lower_simple(int32_t cp)
{
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return utf8proc_tolower(cp);
}

/* Decimal digits and exponent of x at p significant digits: x ~ m * 10^(e-p+1). */
static void digits_at(double x, int p, uint64_t *m, int *e)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    uint64_t v = 0;
    const char *s = buf;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') v = v * 10 + (uint64_t)(*s - '0');
    *m = v;
    *e = *s == 'e' ? atoi(s + 1) : 0;
}

static int reads_back(uint64_t m, int e, int p, double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%" PRIu64 "e%d", m, e - p + 1);
    return strtod(buf, NULL) == x;
}

int pytext_float_repr(double x, char *buf, size_t cap)
{
    if (isnan(x)) return snprintf(buf, cap, "NaN");
    if (isinf(x)) return snprintf(buf, cap, x > 0 ? "Infinity" : "-Infinity");
    const char *sign = signbit(x) ? "-" : "";
    double a = fabs(x);
    if (a == 0) return snprintf(buf, cap, "%s0.0", sign);
    uint64_t m = 0;
    int e = 0, p;
    for (p = 1; p <= 17; p++) {
        digits_at(a, p, &m, &e);
        if (reads_back(m, e, p, a)) break;
        /* Next to a power of two the interval that reads back is lopsided:
         * a neighbour of the nearest p-digit number may be inside it. */
        uint64_t lo = 1;
        for (int k = 1; k < p; k++) lo *= 10;
        if (m + 1 < lo * 10 && reads_back(m + 1, e, p, a)) { m++; break; }
        if (m - 1 >= lo && reads_back(m - 1, e, p, a)) { m--; break; }
    }
    if (p > 17) p = 17;
    char d[24];
    int nd = snprintf(d, sizeof d, "%" PRIu64, m);
    while (nd > 1 && d[nd - 1] == '0') d[--nd] = 0;
    int decpt = e + 1; /* x = 0.d1d2... * 10^decpt */
    if (decpt <= -4 || decpt > 16) {
        int ex = decpt - 1;
        if (nd == 1) return snprintf(buf, cap, "%s%ce%c%02d", sign, d[0], ex < 0 ? '-' : '+', abs(ex));
        return snprintf(buf, cap, "%s%c.%se%c%02d", sign, d[0], d + 1, ex < 0 ? '-' : '+', abs(ex));
    }
    char out[48];
    size_t k = 0;
    if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = d[i];
    } else {
        for (int i = 0; i < decpt; i++) out[k++] = i < nd ? d[i] : '0';
        out[k++] = '.';
        if (decpt >= nd) out[k++] = '0';
        for (int i = decpt; i < nd; i++) out[k++] = d[i];
    }
    out[k] = 0;
    return snprintf(buf, cap, "%s%s", sign, out);
}
