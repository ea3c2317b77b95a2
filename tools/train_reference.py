#!/usr/bin/env python3
"""PyTorch reference for tests/train/test_train_numerics.c: three optimizer steps of
`bertc train` on tests/data/train_small.json, done with transformers.

The same recipe as the test's command line:
  bertc train --model tests/ref/train3/init --train tests/data/train_small.json
      --out RUN --max-seq-length 64 --doc-stride 16 --batch 6 --micro-batch 2
      --max-steps 3 --lr 5e-3 --warmup 1 --weight-decay 0.01 --clip 0.5
      --dropout 0 --no-shuffle --seed 42
i.e. features as run_qa.py's prepare_train_features (BertTokenizerFast), the
windows in file order, steps of 6 windows made of 3 micro-batches of 2 whose
losses are each divided by 3 (gradient accumulation), clip_grad_norm_(0.5),
torch.optim.AdamW (no weight decay on biases and LayerNorm weights, as
run_qa.py's Trainer groups them), get_linear_schedule_with_warmup with 1
warm-up step of 3, dropout off, fp32.

Writes tests/ref/train3/expected.safetensors: the parameters after the three
steps (transformers names, prefixed "step3."), and "loss", "lr", "grad_norm"
([3] each: the step's loss as bertc's metrics.csv logs it, i.e. the mean
over the step's windows, the learning rate used, the norm before clipping).
The init model dir (tests/ref/train3/init) was written by `bertc init` and is
committed, so this script and the test start from the same bytes.

usage: python3 tools/train_reference.py   (from the repository root)
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import BertForQuestionAnswering, BertTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qa_labels import label_windows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INIT = os.path.join(ROOT, "tests/ref/train3/init")
DATA = os.path.join(ROOT, "tests/data/train_small.json")
OUT = os.path.join(ROOT, "tests/ref/train3/expected.safetensors")
T, STRIDE, BATCH, MICRO, STEPS = 64, 16, 6, 2, 3
LR, WARMUP, WD, CLIP, EPS = 5e-3, 1, 0.01, 0.5, 1e-8


def train_features(tok, path):
    """run_qa.py's prepare_train_features, windows in file order."""
    data = json.load(open(path, encoding="utf-8"))["data"]
    questions, contexts, answers = [], [], []
    for art in data:
        for para in art["paragraphs"]:
            for qa in para["qas"]:
                questions.append(qa["question"].lstrip())
                contexts.append(para["context"])
                answers.append(qa["answers"])
    enc = tok(questions, contexts, truncation="only_second", max_length=T, stride=STRIDE,
              return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    starts, ends = label_windows(tok, enc, answers)
    t = lambda k: torch.tensor(enc[k], dtype=torch.long)
    return t("input_ids"), t("token_type_ids"), t("attention_mask"), torch.tensor(starts), torch.tensor(ends)


def main():
    torch.manual_seed(0)
    tok = BertTokenizerFast.from_pretrained(INIT)
    ids, types, mask, starts, ends = train_features(tok, DATA)
    print(f"{len(ids)} windows of {T} tokens; steps use windows 0..{STEPS * BATCH - 1}")
    if len(ids) < STEPS * BATCH:
        sys.exit("not enough windows for the steps")
    model = BertForQuestionAnswering.from_pretrained(
        INIT, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model.float()
    model.train()
    no_decay = ("bias", "LayerNorm.weight")
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not any(x in n for x in no_decay)], "weight_decay": WD},
        {"params": [p for n, p in named if any(x in n for x in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=EPS, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: k / max(1, WARMUP) if k < WARMUP else max(0.0, (STEPS - k) / max(1, STEPS - WARMUP)))
    losses, lrs, norms = [], [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=False)
        total = 0.0
        nmicro = BATCH // MICRO
        for k in range(nmicro):
            sl = slice(step * BATCH + k * MICRO, step * BATCH + (k + 1) * MICRO)
            out = model(input_ids=ids[sl], token_type_ids=types[sl], attention_mask=mask[sl],
                        start_positions=starts[sl], end_positions=ends[sl])
            (out.loss / nmicro).backward()
            total += out.loss.item() / nmicro
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
        losses.append(total)
        norms.append(float(norm))
        print(f"step {step + 1}: loss {total:.9g} lr {lrs[-1]:.9g} grad_norm {norms[-1]:.9g}")
    tensors = {"step3." + n: p.detach().contiguous().clone() for n, p in model.named_parameters()}
    tensors["loss"] = torch.tensor(losses, dtype=torch.float32)
    tensors["lr"] = torch.tensor(lrs, dtype=torch.float32)
    tensors["grad_norm"] = torch.tensor(norms, dtype=torch.float32)
    save_file(tensors, OUT, metadata={"script": "tools/train_reference.py", "torch": torch.__version__})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
