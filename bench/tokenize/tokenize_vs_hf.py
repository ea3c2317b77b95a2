#!/usr/bin/env python3
"""Tokens per second of `bertc tokenize` against transformers' BertTokenizerFast (Rust tokenizers), one
thread each, on the SQuAD v1.1 dev contexts; also checks that both give the same ids and offsets.

    python3 bench/tokenize/tokenize_vs_hf.py [--bertc build/bertc] [--data ../shared/data] [--repeat 5] [--runs 3]

Both tokenize the same lines: every context once per repeat, with the few '\\n' inside contexts made
spaces (bertc tokenize reads one text per line). bertc's time is the whole process (start-up, vocab
load, reading stdin, printing ids:begin-end); transformers' is the call
tok(lines, add_special_tokens=False, return_offsets_mapping=True) with TOKENIZERS_PARALLELISM=false
and RAYON_NUM_THREADS=1. CPU time (user + sys) is the figure compared, as the machine may be shared;
wall time is printed too. Best of --runs.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bertc", default=os.path.join(ROOT, "build/bertc"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()

    with open(os.path.join(a.data, "squad-v1.1/dev-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)["data"]
    contexts = [p["context"].replace("\n", " ") for art in data for p in art["paragraphs"]]
    lines = contexts * a.repeat
    text = "".join(s + "\n" for s in lines).encode("utf-8")
    vocab = os.path.join(a.data, "vocab/bert-base-uncased-vocab.txt")

    import transformers
    transformers.logging.set_verbosity_error()
    d = tempfile.mkdtemp(prefix="bertc-bench-")
    with open(vocab, "rb") as f, open(os.path.join(d, "vocab.txt"), "wb") as g:
        g.write(f.read())
    tok = transformers.BertTokenizerFast.from_pretrained(d)

    hf_best = None
    for _ in range(a.runs):
        c0, w0 = self_cpu(), time.perf_counter()
        enc = tok(lines, add_special_tokens=False, return_offsets_mapping=True)
        c, w = self_cpu() - c0, time.perf_counter() - w0
        if hf_best is None or c < hf_best[0]:
            hf_best = (c, w)
    ntok = sum(len(x) for x in enc["input_ids"])

    bc_best, out = None, None
    with tempfile.TemporaryFile() as fin:
        fin.write(text)
        for _ in range(a.runs):
            fin.seek(0)
            c0, w0 = child_cpu(), time.perf_counter()
            p = subprocess.run([a.bertc, "tokenize", "--vocab", vocab, "--offsets"], stdin=fin, capture_output=True)
            c, w = child_cpu() - c0, time.perf_counter() - w0
            if p.returncode:
                sys.exit("bertc tokenize failed: " + p.stderr.decode())
            out = p.stdout
            if bc_best is None or c < bc_best[0]:
                bc_best = (c, w)

    got = out.decode().split("\n")[:-1]
    same = sum(1 for g, ids, offs in zip(got, enc["input_ids"], enc["offset_mapping"])
               if g == " ".join("%d:%d-%d" % (i, b, e) for i, (b, e) in zip(ids, offs)))
    print("input: %d SQuAD dev contexts x %d = %d lines, %.1f MB, %d tokens" %
          (len(contexts), a.repeat, len(lines), len(text) / 1e6, ntok))
    print("same ids and offsets: %d of %d lines" % (same, len(lines)))
    print("%-44s cpu %7.3f s  wall %7.3f s  %10.0f tokens/s (cpu)" % ("transformers BertTokenizerFast, 1 thread",
                                                                       hf_best[0], hf_best[1], ntok / hf_best[0]))
    print("%-44s cpu %7.3f s  wall %7.3f s  %10.0f tokens/s (cpu)" % ("bertc tokenize --offsets (whole process)",
                                                                       bc_best[0], bc_best[1], ntok / bc_best[0]))
    print("bertc / transformers: %.1fx (cpu time), %.1fx (wall time)" % (hf_best[0] / bc_best[0], hf_best[1] / bc_best[1]))
    return 0 if same == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
