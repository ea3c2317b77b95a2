#!/usr/bin/env python3
"""Reference files for bertc's BERT tokenizer, made with transformers' BertTokenizerFast.

    python3 tools/tokenizer_parity.py [--data ../shared/data] [--refs] [--tables]

--refs (default) writes tests/ref/tokenizer/:
  squad_uncased.bin, squad_cased.bin   SQuAD v1.1 dev, every context and question, bert-base-uncased vocab,
                                       do_lower_case True / False
  cmrc.bin, xquad_zh.bin               CMRC 2018 trial and XQuAD zh, bert-base-chinese vocab, do_lower_case
                                       False (what bert-base-chinese's tokenizer_config.json says)
  hard_uncased.bin, hard_cased.bin,    tests/data/hard_strings.txt with the uncased vocab (lower case on and
  hard_chinese.bin                     off) and with the chinese vocab (lower case off)
  codepoints.txt                       what the fast tokenizer does with every code point on its own
--fuzz N --bertc BIN tokenizes N random strings of nasty pieces and random code points with the fast
  tokenizer and with `BIN tokenize --offsets` (both vocabularies, lower case on and off) and prints the
  first differences; nothing is written.
--tables writes src/text/unicode_tables.c: where the Unicode tables inside `tokenizers` (old crates for
  categories and NFD, Rust's std for lower case) differ from utf8proc's, found by asking the tokenizer
  about every code point. Run it again when utf8proc or tokenizers changes; test_tokenizer checks the
  result against codepoints.txt.

.bin layout (little-endian): "BTKREF1\\0", u32 nstrings, u32 nfull; nstrings records of u64 text_hash
(FNV-1a 64 of the UTF-8 bytes), u64 token_hash (FNV-1a 64 over int32 id, begin, end of every token),
u32 ntokens; then for the first nfull strings ntokens int32 ids, begins, ends. Strings come in JSON
order: for each paragraph its context, then each question as written (not stripped).
"""
import argparse
import ctypes
import json
import os
import struct
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FNV_INIT = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
NFULL = 200

# tokenizers' is_chinese_char (normalizers/bert.rs); note 0x2B920, not 0x2B820 as in the Python
# BasicTokenizer: the fast tokenizer is the reference, so CJK Extension E's first 256 code points
# are ordinary letters there.
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
# Rust's char::is_whitespace (White_Space), which tokenizers uses after its own \t \n \r.
WHITESPACE = [0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B)) + \
             [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def fnv(data, h=FNV_INIT):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def make_tokenizer(vocab_path, lower):
    import transformers
    transformers.logging.set_verbosity_error()
    d = tempfile.mkdtemp(prefix="bertc-tok-")
    with open(vocab_path, "rb") as f, open(os.path.join(d, "vocab.txt"), "wb") as g:
        g.write(f.read())
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": lower, "model_max_length": 512}, f)
    tok = transformers.BertTokenizerFast.from_pretrained(d)
    return tok


def encode_all(tok, strings):
    out = []
    for i in range(0, len(strings), 512):
        enc = tok(strings[i:i + 512], add_special_tokens=False, return_offsets_mapping=True)
        for ids, offs in zip(enc["input_ids"], enc["offset_mapping"]):
            out.append((ids, [o[0] for o in offs], [o[1] for o in offs]))
    return out


def write_ref(path, strings, encs):
    with open(path, "wb") as f:
        f.write(b"BTKREF1\0" + struct.pack("<II", len(strings), min(NFULL, len(strings))))
        for s, (ids, b, e) in zip(strings, encs):
            th = fnv(s.encode("utf-8"))
            kh = FNV_INIT
            for t in zip(ids, b, e):
                kh = fnv(struct.pack("<iii", *t), kh)
            f.write(struct.pack("<QQI", th, kh, len(ids)))
        for s, (ids, b, e) in list(zip(strings, encs))[:NFULL]:
            n = len(ids)
            f.write(struct.pack("<%di" % n, *ids) + struct.pack("<%di" % n, *b) + struct.pack("<%di" % n, *e))
    ntok = sum(len(e[0]) for e in encs)
    print("%-40s %6d strings %8d tokens %8d bytes" % (os.path.relpath(path, ROOT), len(strings), ntok,
                                                      os.path.getsize(path)))


def squad_strings(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    out = []
    for art in data:
        for par in art["paragraphs"]:
            out.append(par["context"])
            for qa in par["qas"]:
                out.append(qa["question"])
    return out


def hard_strings():
    with open(os.path.join(ROOT, "tests/data/hard_strings.txt"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith("#")]


def refs(data):
    outdir = os.path.join(ROOT, "tests/ref/tokenizer")
    os.makedirs(outdir, exist_ok=True)
    unc = os.path.join(data, "vocab/bert-base-uncased-vocab.txt")
    zh = os.path.join(data, "vocab/bert-base-chinese-vocab.txt")
    squad = squad_strings(os.path.join(data, "squad-v1.1/dev-v1.1.json"))
    cmrc = squad_strings(os.path.join(data, "cmrc2018/cmrc2018_trial.json"))
    xquad = squad_strings(os.path.join(data, "xquad/xquad.zh.json"))
    hard = hard_strings()
    t_unc, t_cas, t_zh = make_tokenizer(unc, True), make_tokenizer(unc, False), make_tokenizer(zh, False)
    for name, tok, strings in [("squad_uncased", t_unc, squad), ("squad_cased", t_cas, squad),
                               ("cmrc", t_zh, cmrc), ("xquad_zh", t_zh, xquad), ("hard_uncased", t_unc, hard),
                               ("hard_cased", t_cas, hard), ("hard_chinese", t_zh, hard)]:
        write_ref(os.path.join(outdir, name + ".bin"), strings, encode_all(tok, strings))
    write_codepoints(os.path.join(outdir, "codepoints.txt"))


# ---- per code point behaviour of the fast tokenizer ----

def all_codepoints():
    return [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def hf_probe():
    """For every code point: its class (X removed, W whitespace, C CJK, P punctuation, O other) and
    what the uncased normalizer makes of it alone (for P, O and C)."""
    from tokenizers import normalizers, pre_tokenizers
    nu = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    nc = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=False)
    pt = pre_tokenizers.BertPreTokenizer()
    cls, norm = {}, {}
    for cp in all_codepoints():
        c = chr(cp)
        k = nc.normalize_str(c)
        if k == "":
            cls[cp] = "X"
        elif k == " ":
            cls[cp] = "W"
        elif k == " %s " % c:
            cls[cp] = "C"
        else:
            assert k == c, hex(cp)
            n = len(pt.pre_tokenize_str("a" + c + "a"))
            assert n in (1, 3), hex(cp)
            cls[cp] = "P" if n == 3 else "O"
        if cls[cp] in "POC":
            u = nu.normalize_str(c)
            norm[cp] = u.strip(" ") if cls[cp] == "C" else u
    return cls, norm


def write_codepoints(path):
    cls, norm = hf_probe()
    lines = ["# Generated by tools/tokenizer_parity.py from tokenizers' BertNormalizer + BertPreTokenizer.",
             "# range FIRST LAST CLASS: classes other than O (X removed, W whitespace, C CJK, P punctuation).",
             "# normhash H: FNV-1a 64 over, for every P/O/C code point in order, its code point (u32 LE) and",
             "#   its uncased normalization (UTF-8) and a 0 byte.",
             "# norm CP [CP...]: uncased normalization of one code point where it is not the code point itself",
             "#   (Hangul syllables left out: the hash covers them)."]
    cps = all_codepoints()
    start = prev = None
    for cp in cps + [None]:
        k = cls[cp] if cp is not None else None
        if start is not None and (cp is None or k != cls[start] or cp != prev + 1):
            if cls[start] != "O":
                lines.append("range %X %X %s" % (start, prev, cls[start]))
            start = None
        if start is None:
            start = cp
        prev = cp
    h = FNV_INIT
    for cp in cps:
        if cls[cp] in "POC":
            h = fnv(struct.pack("<I", cp) + norm[cp].encode("utf-8") + b"\0", h)
    lines.append("normhash %016X" % h)
    for cp in cps:
        if cls[cp] in "POC" and norm[cp] != chr(cp) and not 0xAC00 <= cp <= 0xD7A3:
            lines.append("norm %X%s" % (cp, "".join(" %X" % ord(x) for x in norm[cp])))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%-40s %d lines %d bytes" % (os.path.relpath(path, ROOT), len(lines), os.path.getsize(path)))


# ---- src/text/unicode_tables.c ----

class Utf8proc:
    def __init__(self):
        class Prop(ctypes.Structure):
            _fields_ = [("category", ctypes.c_int16), ("combining_class", ctypes.c_int16)]
        self.lib = lib = ctypes.CDLL("libutf8proc.so.2")
        lib.utf8proc_get_property.restype = ctypes.POINTER(Prop)
        lib.utf8proc_get_property.argtypes = [ctypes.c_int32]
        lib.utf8proc_tolower.restype = ctypes.c_int32
        lib.utf8proc_tolower.argtypes = [ctypes.c_int32]
        lib.utf8proc_decompose_char.restype = ctypes.c_ssize_t
        lib.utf8proc_decompose_char.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_ssize_t,
                                                ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        lib.utf8proc_unicode_version.restype = ctypes.c_char_p
        self.version = lib.utf8proc_unicode_version().decode()
        self.buf = (ctypes.c_int32 * 32)()

    def category(self, cp):
        return self.lib.utf8proc_get_property(cp).contents.category

    def ccc(self, cp):
        return self.lib.utf8proc_get_property(cp).contents.combining_class

    def decompose(self, cp):
        bc = ctypes.c_int(0)
        n = self.lib.utf8proc_decompose_char(cp, self.buf, 32, 1 << 4, ctypes.byref(bc))  # UTF8PROC_DECOMPOSE
        assert 0 < n <= 32
        return [self.buf[i] for i in range(n)]

    def lower(self, cp):
        return self.lib.utf8proc_tolower(cp)


# utf8proc category numbers
CN, MN, PC, PO, CC, CF, CS, CO = 0, 6, 12, 18, 26, 27, 28, 29
CLS_NUM = {"O": 0, "X": 1, "P": 2}  # the classes the C tables store (W and C are fixed lists)


def derived(u, cp):
    """What src/text/unicode.c computes from utf8proc before exceptions: (class, mn, ccc, decomposition)."""
    cat = u.category(cp)
    if cat == CN:  # not assigned in the Unicode of the tables: tokenizers' old tables have it as nothing
        return "O", False, 0, [cp]
    if cp == 0xFFFD or (cat in (CC, CF, CS, CO) and cp not in (9, 10, 13)):
        k = "X"
    elif 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or PC <= cat <= PO:
        k = "P"
    else:
        k = "O"
    return k, cat == MN, u.ccc(cp), u.decompose(cp)


def hf_tables(cls):
    from tokenizers import Tokenizer, normalizers
    from tokenizers.models import WordLevel
    nfd = normalizers.NFD()
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True)
    unc = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    # A word-level model makes every word [UNK] spanning the whole word: its end offset shows where the
    # last kept character came from after NFD reordering.
    t = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    t.normalizer = unc
    from tokenizers import pre_tokenizers
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    dec, mn, low = {}, {}, {}
    for cp in all_codepoints():
        c = chr(cp)
        d = nfd.normalize_str(c)
        dec[cp] = [ord(x) for x in d]
        if d == c:
            mn[cp] = strip.normalize_str(c) == ""
        low[cp] = [ord(x) for x in lower.normalize_str(c)]
    return dec, mn, low, t, unc


def ccc_known(cp, c, mn, t, unc):
    """Does tokenizers' NFD know the combining class c of cp? Reorder it against a reference mark."""
    ref, r = (0x1D165, 216) if c != 216 else (0x1D16D, 226)
    s = "x" + chr(cp) + chr(ref) if c > r else "x" + chr(ref) + chr(cp)
    if not mn:  # kept: the order shows
        out = unc.normalize_str(s)
        swapped = "x" + s[2] + s[1]
        assert out in (s, swapped), hex(cp)
        return out == swapped
    end = t.encode(s).offsets[-1][1]
    # c > r: reordered gives x R cp -> R from position 1 -> end 2; else end 3. c < r: the other way round.
    return end == 2 if c > r else end == 3


def tables():
    u = Utf8proc()
    if u.version != "15.0.0":
        sys.exit("tokenizer_parity.py --tables: utf8proc has Unicode %s; the tables are made against 15.0.0 "
                 "(utf8proc 2.8)" % u.version)
    cls, _ = hf_probe()
    dec, mn, low, t, unc = hf_tables(cls)
    ex = {}  # cp -> dict of overridden fields
    for cp in all_codepoints():
        k, dmn, dccc, ddec = derived(u, cp)
        e = {}
        if cls[cp] in "XPO" and cls[cp] != k:
            e["cls"] = cls[cp]
        elif cls[cp] in "WC":
            inw = cp in WHITESPACE and cp not in (0xB, 0xC, 0x85)
            inc = any(a <= cp <= b for a, b in CJK_RANGES)
            assert (cls[cp] == "W" and inw) or (cls[cp] == "C" and inc and not inw), hex(cp)
        if dec[cp] != ddec:
            e["dec"] = dec[cp]
        if cp in mn:
            if mn[cp] != dmn:
                e["mn"] = mn[cp]
            if dccc and not ccc_known(cp, dccc, mn[cp], t, unc):
                e["ccc0"] = True
        dl = u.lower(cp)
        if low[cp] != [dl]:
            e["low"] = low[cp]
        if e:
            ex[cp] = e
    assigned, start, prev = [], None, None
    for cp in all_codepoints() + [None]:
        a = cp is not None and u.category(cp) != CN
        if start is not None and (not a or cp != prev + 1):
            assigned.append((start, prev))
            start = None
        if a and start is None:
            start = cp
        prev = cp
    write_tables(os.path.join(ROOT, "src/text/unicode_tables.c"), ex, assigned, u.version)


def write_tables(path, ex, assigned, version):
    import tokenizers
    pool, rows = [], []
    for cp in sorted(ex):
        e = ex[cp]
        flags, dec_at, dec_n, low_at, low_n = [], 0, 0, 0, 0
        if "cls" in e:
            flags.append("UEX_CLASS")
        if "mn" in e:
            flags.append("UEX_MN")
        if "ccc0" in e:
            flags.append("UEX_CCC0")
        if "dec" in e:
            flags.append("UEX_DECOMP")
            dec_at, dec_n = len(pool), len(e["dec"])
            pool += e["dec"]
        if "low" in e:
            flags.append("UEX_LOWER")
            low_at, low_n = len(pool), len(e["low"])
            pool += e["low"]
        rows.append("{0x%05X,%s,%d,%d,%d,%d,%d,%d}," % (cp, "|".join(flags), CLS_NUM.get(e.get("cls", "O")),
                                                       int(e.get("mn", False)), dec_at, dec_n, low_at, low_n))
    out = ["/* Generated by tools/tokenizer_parity.py --tables: do not edit.",
           " *",
           " * The fast tokenizer (tokenizers %s) takes categories and NFD from old Unicode tables and lower"
           % tokenizers.__version__,
           " * case from Rust's std (newer). These are the code points where that differs from utf8proc with",
           " * Unicode %s, found by asking the tokenizer about every code point; unicode.c applies them over"
           % version,
           " * utf8proc, and treats code points not assigned in Unicode %s as unassigned (tokenizers' tables"
           % version,
           " * are older), so a newer utf8proc does not change the result. */",
           '#include "text/unicode_tables.h"',
           "",
           'const char uni_tables_version[] = "%s";' % version,
           "",
           "const uni_exception uni_exceptions[] = {"]
    for i in range(0, len(rows), 3):
        out.append("    " + " ".join(rows[i:i + 3]))
    out.append("};")
    out.append("const int uni_nexceptions = (int)(sizeof uni_exceptions / sizeof uni_exceptions[0]);")
    out.append("")
    out.append("const uint32_t uni_pool[] = {")
    for i in range(0, len(pool), 10):
        out.append("    " + " ".join("0x%05X," % x for x in pool[i:i + 10]))
    out.append("};")
    out.append("")
    out.append("/* Code point ranges assigned in Unicode %s, [first, last]. */" % version)
    out.append("const uint32_t uni_assigned[][2] = {")
    for i in range(0, len(assigned), 5):
        out.append("    " + " ".join("{0x%05X,0x%05X}," % r for r in assigned[i:i + 5]))
    out.append("};")
    out.append("const int uni_nassigned = (int)(sizeof uni_assigned / sizeof uni_assigned[0]);")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d exceptions, %d pool entries, %d assigned ranges, %d lines" %
          (os.path.relpath(path, ROOT), len(rows), len(pool), len(assigned), len(out)))


def fuzz(data, n, bertc):
    import random
    import subprocess
    rnd = random.Random(n)
    pieces = ["a", "Zq", "e\u0301", "\u0301", "\u0316", "\U0001D165", "\U0001D16D", "\u0898", "\u0345", " ", "\t",
              ",", "[", "[SEP]", "[MASK]", "[SE", "]", "\ufffd", "\u200b", "##", "\u0130", "\ufb01", "\u00e9", "un",
              "\u4e2d", "\uac00", "\U00020000", "\u00a0", "1", "\u30ab\u3099", "\u064e", "\u0f73", "\u1734",
              "\u0344", "\u1e9e", "\u212b", "\u03a3", "\u0000", "\u0085", "\u2028", "\ue000", "\U0002B820", "x" * 60]
    strs = []
    for _ in range(n):
        parts = []
        for _ in range(rnd.randrange(40)):
            r = rnd.random()
            if r < 0.7:
                parts.append(rnd.choice(pieces))
            else:
                cp = rnd.randrange(0x110000) if r < 0.8 else rnd.randrange(0x3000)
                if 0xD800 <= cp < 0xE000 or cp in (10, 13):
                    cp = 0x41
                parts.append(chr(cp))
        strs.append("".join(parts))
    for vocab, lower in [("bert-base-uncased-vocab.txt", True), ("bert-base-uncased-vocab.txt", False),
                         ("bert-base-chinese-vocab.txt", False)]:
        path = os.path.join(data, "vocab", vocab)
        tok = make_tokenizer(path, lower)
        want = [" ".join("%d:%d-%d" % (i, b, e) for i, b, e in zip(*enc)) for enc in encode_all(tok, strs)]
        args = [bertc, "tokenize", "--vocab", path, "--offsets"] + ([] if lower else ["--cased"])
        text = "".join(s + "\n" for s in strs).encode("utf-8")
        got = subprocess.run(args, input=text, capture_output=True, check=True).stdout.decode().split("\n")[:-1]
        bad = [i for i in range(n) if got[i] != want[i]]
        print("fuzz %s lower=%s: %d strings, %d differ" % (vocab, lower, n, len(bad)))
        for i in bad[:3]:
            print("  %r\n  got  %s\n  want %s" % (strs[i], got[i], want[i]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data"))
    ap.add_argument("--refs", action="store_true", help="write tests/ref/tokenizer/ (default)")
    ap.add_argument("--tables", action="store_true", help="write src/text/unicode_tables.c")
    ap.add_argument("--fuzz", type=int, default=0, metavar="N", help="compare N random strings with --bertc")
    ap.add_argument("--bertc", default=os.path.join(ROOT, "build/bertc"))
    a = ap.parse_args()
    if a.fuzz:
        fuzz(a.data, a.fuzz, a.bertc)
        return
    if a.tables:
        tables()
    if a.refs or not a.tables:
        refs(a.data)


if __name__ == "__main__":
    main()
