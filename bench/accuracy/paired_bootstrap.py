#!/usr/bin/env python3
"""Paired bootstrap of the SQuAD v1.1 F1 difference between two prediction
files on the same data: per-question F1 as evaluate-v1.1.py computes it
(normalised tokens, best over the gold answers), then 2,000 resamples of the
questions with replacement. Prints both F1s, the difference A - B, its 95%
interval and the share of identical predictions. The interval covers the
sampling of questions only, not the run-to-run spread of training seeds.

usage: python3 bench/accuracy/paired_bootstrap.py DATA.json A_predictions.json B_predictions.json
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_squad_hf import f1  # noqa: E402  (evaluate-v1.1.py's per-answer F1)


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    d = json.load(open(sys.argv[1], encoding="utf-8"))
    gold = {q["id"]: [a["text"] for a in q["answers"]] for art in d["data"] for p in art["paragraphs"]
            for q in p["qas"]}
    a = json.load(open(sys.argv[2], encoding="utf-8"))
    b = json.load(open(sys.argv[3], encoding="utf-8"))
    ids = sorted(gold)
    fa = [max(f1(a.get(i, ""), g) for g in gold[i]) for i in ids]
    fb = [max(f1(b.get(i, ""), g) for g in gold[i]) for i in ids]
    diff = [x - y for x, y in zip(fa, fb)]
    n = len(ids)
    rng = random.Random(0)
    bs = sorted(100 * sum(diff[rng.randrange(n)] for _ in range(n)) / n for _ in range(2000))
    same = sum(a.get(i) == b.get(i) for i in ids) / n
    print(f"F1 A {100 * sum(fa) / n:.2f} B {100 * sum(fb) / n:.2f} diff {100 * sum(diff) / n:+.2f} "
          f"95% interval {bs[50]:+.2f}..{bs[1949]:+.2f}; identical predictions {same:.0%} of {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
