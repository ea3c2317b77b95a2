#!/usr/bin/env python3
"""The Hugging Face side of bench/tokenize/features_vs_hf.sh: run_qa.py's feature preparation.

Reads a SQuAD-format file, builds BertTokenizerFast from a vocab, and runs
prepare_train_features and prepare_validation_features (the code copied from
run_qa.py in tools/features_parity.py) over all examples in batches of 1000,
as datasets.map(batched=True) feeds them. The tokenizer's Rust thread pool
gets --threads threads (RAYON_NUM_THREADS, set before tokenizers is loaded).
Times exclude the Python and transformers start-up. Prints one line per
stage and a last line `hf: features F train_s X both_s Y train_cpu X both_cpu Y`
(wall seconds, then CPU seconds of all the process's threads).
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--cased", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-seq-length", type=int, default=384)
    ap.add_argument("--doc-stride", type=int, default=128)
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import features_parity as fp
    from transformers import BertTokenizerFast

    t0, c0 = time.perf_counter(), time.process_time()
    tok = BertTokenizerFast(args.vocab, do_lower_case=not args.cased)
    with open(args.data, encoding="utf-8") as f:
        data = json.load(f)
    ex = {"id": [], "question": [], "context": [], "answers": []}
    for art in data["data"]:
        for par in art["paragraphs"]:
            for qa in par["qas"]:
                ex["id"].append(qa["id"])
                ex["question"].append(qa["question"])
                ex["context"].append(par["context"])
                ex["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                      "answer_start": [a["answer_start"] for a in qa["answers"]]})
    t1 = time.perf_counter()
    n = len(ex["id"])
    batches = [{k: v[i:i + 1000] for k, v in ex.items()} for i in range(0, n, 1000)]
    nf = 0
    for b in batches:
        nf += len(fp.prepare_train_features(dict(b), tok, args.max_seq_length, args.doc_stride)["input_ids"])
    t2, c2 = time.perf_counter(), time.process_time()
    nv = 0
    for b in batches:
        nv += len(fp.prepare_validation_features(dict(b), tok, args.max_seq_length, args.doc_stride)["input_ids"])
    t3, c3 = time.perf_counter(), time.process_time()
    assert nv == nf
    print(f"hf: load {t1 - t0:.3f} s, prepare_train_features {t2 - t1:.3f} s, "
          f"prepare_validation_features {t3 - t2:.3f} s ({args.threads} threads)")
    print(f"hf: features {nf} train_s {t2 - t0:.3f} both_s {t3 - t0:.3f} train_cpu {c2 - c0:.3f} both_cpu {c3 - c0:.3f}")


if __name__ == "__main__":
    main()
