#!/usr/bin/env python3
"""Checks that transformers loads a model dir that bertc wrote (bertc init, or a
training run's final/): BertForQuestionAnswering.from_pretrained with no missing,
unexpected or mismatched tensors, every tensor equal to the file's bytes,
AutoTokenizer with the dir's casing, and a forward pass on one question/context
pair. With --init it also checks transformers' _init_weights statistics
(N(0, initializer_range) weights, LayerNorm 1/0, biases 0, the padding row 0).

With --compare SRC (the model dir bertc loaded, e.g. a pretrained BertModel), the
encoder output of DIR must equal SRC's on the same input.

usage: python3 tools/check_export.py DIR [--init] [--compare SRC]
Exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoModel, AutoTokenizer, BertForQuestionAnswering


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--init", action="store_true", help="also check the random-initialisation statistics")
    ap.add_argument("--compare", metavar="SRC", help="model dir whose encoder output DIR must reproduce")
    args = ap.parse_args()
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    model, info = BertForQuestionAnswering.from_pretrained(args.dir, output_loading_info=True)
    model.eval()
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        check(len(info.get(k, [])) == 0, f"from_pretrained {k}: {list(info.get(k, []))[:5]}")

    tensors = load_file(os.path.join(args.dir, "model.safetensors"))
    state = model.state_dict()
    same = [n for n, a in tensors.items() if n in state and np.array_equal(state[n].numpy(), a)]
    check(len(same) == len(tensors), f"{len(same)} of {len(tensors)} tensors identical in transformers and in the file")
    check(all(a.dtype == np.float32 for a in tensors.values()), "every tensor is F32")

    tok = AutoTokenizer.from_pretrained(args.dir)
    cfg_path = os.path.join(args.dir, "tokenizer_config.json")
    lower = json.load(open(cfg_path)).get("do_lower_case", True) if os.path.exists(cfg_path) else True
    ids = tok("Hello World")["input_ids"]
    print(f"      tokenizer {type(tok).__name__}, vocab {tok.vocab_size}, 'Hello World' -> {ids}")
    check(tok.vocab_size == model.config.vocab_size, "tokenizer vocab size equals config vocab_size")
    check((tok.convert_ids_to_tokens(ids)[1] == "hello") == bool(lower), f"tokenizer lower-cases: {bool(lower)}")

    q, c = "Who wrote the book?", "The book was written by Jane Austen in 1813."
    enc = tok(q, c, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    s, e = out.start_logits[0], out.end_logits[0]
    check(s.shape == enc["input_ids"].shape[1:] and bool(torch.isfinite(s).all() and torch.isfinite(e).all()),
          f"forward on one pair: {enc['input_ids'].shape[1]} tokens, finite start/end logits "
          f"(start[:3] {s[:3].tolist()})")

    if args.compare:
        src = AutoModel.from_pretrained(args.compare).eval()
        with torch.no_grad():
            want = src(**enc).last_hidden_state
            got = model.bert(**enc).last_hidden_state
        diff = (got - want).abs().max().item()
        check(diff == 0, f"encoder output equals {args.compare}'s: max abs diff {diff:.3e} over {tuple(got.shape)}")

    if args.init:
        std = model.config.initializer_range or 0.02
        pad = model.config.pad_token_id
        for name, a in tensors.items():
            a = a.astype(np.float64)
            if name.endswith("LayerNorm.weight"):
                check(bool(np.all(a == 1)), f"{name} all 1")
            elif name.endswith("bias"):
                check(bool(np.all(a == 0)), f"{name} all 0")
            else:
                if name.endswith("word_embeddings.weight") and pad is not None:
                    check(bool(np.all(a[pad] == 0)), f"{name} row {pad} (padding) all 0")
                    a = np.delete(a, pad, axis=0)
                n = a.size
                # mean within 5 standard errors, std within 5 standard errors (std of s ~ std/sqrt(2n))
                m_ok = abs(a.mean()) < 5 * std / math.sqrt(n)
                s_ok = abs(a.std() - std) < 5 * std / math.sqrt(2 * n)
                check(m_ok and s_ok, f"{name} mean {a.mean():+.2e} std {a.std():.5f} (want 0, {std}; n={n})")

    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
