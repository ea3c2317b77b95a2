#!/usr/bin/env python3
"""The round trip TF -> bertc -> Hugging Face dir -> transformers.

    bertc convert tests/ref/tf/google DST
    python3 tools/check_tf_convert.py DST [tests/ref/tf/reference.safetensors]

Loads DST with transformers (BertForQuestionAnswering and AutoTokenizer
.from_pretrained), runs the reference batch of tools/make_tf_checkpoint.py
through it in float32 and prints the largest difference from the reference
logits (which transformers computed from the tensors TensorFlow's own reader
gave back). Exits 1 when it exceeds 1e-5 (absolute, + 1e-5 relative).
"""
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoTokenizer, BertForQuestionAnswering

dst = sys.argv[1]
ref = load_file(sys.argv[2] if len(sys.argv) > 2 else "tests/ref/tf/reference.safetensors")
m = BertForQuestionAnswering.from_pretrained(dst, attn_implementation="eager").eval()
tok = AutoTokenizer.from_pretrained(dst)
print("tokenizer:", type(tok).__name__, "do_lower_case", getattr(tok, "do_lower_case", None),
      "vocab", len(tok), "encodes 'The cat sat.' as", tok("The cat sat.")["input_ids"])
with torch.no_grad():
    o = m(input_ids=torch.from_numpy(ref["input_ids"]).long(),
          token_type_ids=torch.from_numpy(ref["token_type_ids"]).long(),
          attention_mask=torch.from_numpy(ref["attention_mask"]).long())
bad = 0
for name, got in (("start_logits", o.start_logits.numpy()), ("end_logits", o.end_logits.numpy())):
    want = ref[name]
    d = np.abs(got - want)
    ok = bool(np.all(d <= 1e-5 + 1e-5 * np.abs(want)))
    bad += not ok
    print("%-12s max_abs %.3e  %s" % (name, d.max(), "ok" if ok else "FAIL"))
sys.exit(1 if bad else 0)
