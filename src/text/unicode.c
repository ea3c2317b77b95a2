/* Character properties of the fast BERT tokenizer (see unicode.h). The Basic Multilingual Plane is
 * looked up once into a 64K table at start-up; other planes are computed on each call. */
#include "text/unicode.h"
#include "text/unicode_tables.h"

#include <pthread.h>
#include <utf8proc.h>

/* BMP table entry: bits 0-2 class, 3 mn, 4 simple, 8-15 ccc */
static uint16_t bmp[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static const uni_exception *find_exception(uint32_t cp)
{
    int lo = 0, hi = uni_nexceptions - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_exceptions[mid].cp == cp) return &uni_exceptions[mid];
        if (uni_exceptions[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* The tokenizer's tables are older than the generated ones: whatever a newer utf8proc assigns
 * beyond them is, to the tokenizer, an unassigned code point. */
static int is_assigned(uint32_t cp)
{
    int lo = 0, hi = uni_nassigned - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < uni_assigned[mid][0]) hi = mid - 1;
        else if (cp > uni_assigned[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

/* Rust's char::is_whitespace, as tokenizers uses it (U+000B, U+000C and U+0085 are also controls
 * and so removed before this is asked). */
static int is_space(uint32_t cp)
{
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* tokenizers' is_chinese_char: the Python BasicTokenizer's ranges, except 0x2B920 where Python has
 * 0x2B820 (the fast tokenizer is the reference; CJK Extension E's first 256 are letters there). */
static int is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int ascii_punct(uint32_t cp)
{
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
}

static int decompose_raw(uint32_t cp, const uni_exception *ex, int assigned, uint32_t out[UNI_MAXDECOMP])
{
    if (ex && (ex->flags & UEX_DECOMP)) {
        for (int i = 0; i < ex->dec_n; i++) out[i] = uni_pool[ex->dec_at + i];
        return ex->dec_n;
    }
    if (assigned && cp >= 0x80) {
        utf8proc_int32_t buf[UNI_MAXDECOMP];
        int last = 0;
        utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, UNI_MAXDECOMP, UTF8PROC_DECOMPOSE, &last);
        if (n >= 1 && n <= UNI_MAXDECOMP) {
            for (int i = 0; i < n; i++) out[i] = (uint32_t)buf[i];
            return (int)n;
        }
    }
    out[0] = cp;
    return 1;
}

static int lower_raw(uint32_t cp, const uni_exception *ex, uint32_t out[UNI_MAXLOWER])
{
    if (ex && (ex->flags & UEX_LOWER)) {
        for (int i = 0; i < ex->low_n; i++) out[i] = uni_pool[ex->low_at + i];
        return ex->low_n;
    }
    out[0] = cp < 0x80 ? (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

static void compute(uint32_t cp, uni_props *p)
{
    const uni_exception *ex = find_exception(cp);
    int assigned = is_assigned(cp);
    const utf8proc_property_t *prop = utf8proc_get_property((utf8proc_int32_t)cp);
    int cat = assigned ? prop->category : UTF8PROC_CATEGORY_CN;

    int cls = UNI_OTHER;
    if (cp == 0xFFFD || ((cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
                          cat == UTF8PROC_CATEGORY_CO) && cp != 9 && cp != 10 && cp != 13))
        cls = UNI_REMOVED;
    else if (ascii_punct(cp) || (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO))
        cls = UNI_PUNCT;
    if (ex && (ex->flags & UEX_CLASS)) cls = ex->cls;
    if (cls != UNI_REMOVED) {
        if (is_space(cp)) cls = UNI_SPACE;
        else if (is_cjk(cp)) cls = UNI_CJK;
    }
    p->cls = (uint8_t)cls;
    p->mn = ex && (ex->flags & UEX_MN) ? ex->mn : cat == UTF8PROC_CATEGORY_MN;
    p->ccc = ex && (ex->flags & UEX_CCC0) ? 0 : assigned ? (uint8_t)prop->combining_class : 0;
    uint32_t d[UNI_MAXDECOMP], l[UNI_MAXLOWER];
    int nd = decompose_raw(cp, ex, assigned, d);
    int nl = lower_raw(cp, ex, l);
    p->simple = nd == 1 && d[0] == cp && nl == 1 && l[0] == cp && !p->mn && p->ccc == 0;
}

static void bmp_init(void)
{
    for (uint32_t cp = 0; cp < 0x10000; cp++) {
        uni_props p;
        if (cp >= 0xD800 && cp < 0xE000) {
            p = (uni_props){UNI_REMOVED, 0, 0, 1};
        } else {
            compute(cp, &p);
        }
        bmp[cp] = (uint16_t)(p.cls | (p.mn << 3) | (p.simple << 4) | (p.ccc << 8));
    }
}

void uni_init(void) { pthread_once(&bmp_once, bmp_init); }

void uni_get(uint32_t cp, uni_props *p)
{
    if (cp < 0x10000) {
        uni_init();
        uint16_t e = bmp[cp];
        p->cls = e & 7;
        p->mn = (e >> 3) & 1;
        p->simple = (e >> 4) & 1;
        p->ccc = (uint8_t)(e >> 8);
        return;
    }
    if (cp > 0x10FFFF) {
        *p = (uni_props){UNI_REMOVED, 0, 0, 1};
        return;
    }
    compute(cp, p);
}

int uni_decompose(uint32_t cp, uint32_t out[UNI_MAXDECOMP])
{
    if (cp > 0x10FFFF) {
        out[0] = cp;
        return 1;
    }
    return decompose_raw(cp, find_exception(cp), is_assigned(cp), out);
}

int uni_lower(uint32_t cp, uint32_t out[UNI_MAXLOWER])
{
    if (cp > 0x10FFFF) {
        out[0] = cp;
        return 1;
    }
    return lower_raw(cp, find_exception(cp), out);
}

int uni_normalize_one(uint32_t cp, uint32_t *out)
{
    uint32_t d[UNI_MAXDECOMP];
    uint8_t ccc[UNI_MAXDECOMP];
    int nd = uni_decompose(cp, d), n = 0;
    for (int i = 0; i < nd; i++) {
        uni_props p;
        uni_get(d[i], &p);
        ccc[i] = p.ccc;
    }
    /* canonical reordering: stable insertion sort of non-starters by class */
    for (int i = 1; i < nd; i++) {
        for (int j = i; j > 0 && ccc[j] && ccc[j - 1] > ccc[j]; j--) {
            uint32_t t = d[j]; d[j] = d[j - 1]; d[j - 1] = t;
            uint8_t c = ccc[j]; ccc[j] = ccc[j - 1]; ccc[j - 1] = c;
        }
    }
    for (int i = 0; i < nd; i++) {
        uni_props p;
        uni_get(d[i], &p);
        if (p.mn) continue;
        n += uni_lower(d[i], out + n);
    }
    return n;
}

const char *uni_tables_unicode_version(void) { return uni_tables_version; }
const char *uni_runtime_unicode_version(void) { return utf8proc_unicode_version(); }
