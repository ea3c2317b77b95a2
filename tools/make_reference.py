#!/usr/bin/env python3
"""Writes the PyTorch reference that tests/model/test_reference.c checks bertc against.

A tiny BertForQuestionAnswering (L2 H64 A4 I128, vocab 100, 64 positions),
random weights, one batch of 3 rows of T=32 tokens with padding, token types
0/1, a start position out of range (ignored) and a negative one (clamped to 0).

tests/ref/tiny/model/            config.json + model.safetensors (the initial
                                 weights; the C test loads them with model_load)
tests/ref/tiny/reference.safetensors
    input_ids, token_type_ids, attention_mask [B,T] int32;
    start_positions, end_positions [B] int32
    start_logits, end_logits [B,T]; loss [1]
    grad.<name>      every parameter gradient of the first step
    grad_norm [3]    the global gradient norm before clipping, per step
    step3.<name>     every parameter after 3 AdamW updates (same batch each step)
    hparams [8]      lr, weight_decay, max_grad_norm, warmup_steps, total_steps, eps, beta1, beta2
    shape [2]        int32: B, T

The forward/backward runs in float64 from the float32 weights, so the stored
values are the exact answer rounded once to float32, not PyTorch's own fp32
rounding; the script also runs the same steps in fp32 and prints how far
PyTorch's fp32 is from it, to show what tolerance an fp32 implementation needs.
Dropout is off (model.eval()) but the math is that of a training step.

Run from the repo root: python3 tools/make_reference.py
"""
import argparse
import json
import math
import os

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import BertConfig, BertForQuestionAnswering
from transformers.optimization import get_linear_schedule_with_warmup

B, T = 3, 32
LR, WD, EPS, B1, B2 = 1e-3, 0.01, 1e-8, 0.9, 0.999
WARMUP, TOTAL, STEPS = 2, 10, 3


def make_config():
    return BertConfig(
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        hidden_act="gelu",
        attn_implementation="eager",
    )


def make_weights(model, gen):
    """std 0.02 as _init_weights, but nothing trivial: LayerNorm weights near 1
    and biases near 0 with noise, biases non-zero, and query/key weights larger
    so that attention is far from uniform and the softmax backward matters."""
    sd = {}
    for name, p in model.state_dict().items():
        shape = tuple(p.shape)
        if "LayerNorm.weight" in name:
            w = 1.0 + 0.2 * torch.randn(shape, generator=gen)
        elif "LayerNorm.bias" in name:
            w = 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            w = 0.02 * torch.randn(shape, generator=gen)
        elif "attention.self.query.weight" in name or "attention.self.key.weight" in name:
            w = 0.15 * torch.randn(shape, generator=gen)
        else:
            w = 0.02 * torch.randn(shape, generator=gen)
        sd[name] = w.to(torch.float32)
    model.load_state_dict(sd)


def make_batch(gen, vocab):
    ids = torch.randint(5, vocab, (B, T), generator=gen, dtype=torch.int64)
    types = torch.zeros(B, T, dtype=torch.int64)
    mask = torch.ones(B, T, dtype=torch.int64)
    lengths = [T, 25, 17]  # row 0 full, rows 1 and 2 padded at the end
    for b, n in enumerate(lengths):
        ids[b, 0] = 2  # a [CLS]-like id
        q = 6 + b
        ids[b, q] = 3  # a [SEP]-like id after the "question"
        types[b, q + 1 : n] = 1
        ids[b, n - 1] = 3
        ids[b, n:] = 0
        mask[b, n:] = 0
    start = torch.tensor([12, T + 5, -3], dtype=torch.int64)  # row 1 ignored (>= T), row 2 clamped to 0
    end = torch.tensor([15, 20, 9], dtype=torch.int64)
    return ids, types, mask, start, end


def train_steps(model, batch, max_norm, dtype):
    """STEPS updates on the same batch; returns (logits, loss, grads of step 0, norms, final params)."""
    model = model.to(dtype)
    model.eval()  # dropout off; everything else is the training math
    ids, types, mask, start, end = batch
    names = [n for n, _ in model.named_parameters()]
    decay = [p for n, p in model.named_parameters() if not (n.endswith(".bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith(".bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR, betas=(B1, B2), eps=EPS, foreach=False,
    )
    sched = get_linear_schedule_with_warmup(opt, WARMUP, TOTAL)
    first = None
    norms = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=start,
                    end_positions=end)
        out.loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            first = (out.start_logits.detach().clone(), out.end_logits.detach().clone(),
                     out.loss.detach().clone(), grads)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        norms.append(float(norm))
        opt.step()
        sched.step()
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert set(names) == set(final)
    return first, norms, final


def f32(t):
    return np.ascontiguousarray(t.detach().to(torch.float32).numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/ref/tiny")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    cfg = make_config()
    model = BertForQuestionAnswering(cfg)
    make_weights(model, gen)
    batch = make_batch(gen, cfg.vocab_size)

    os.makedirs(os.path.join(args.out, "model"), exist_ok=True)
    model.save_pretrained(os.path.join(args.out, "model"))
    init_state = {k: v.clone() for k, v in model.state_dict().items()}

    # Pick max_norm below every step's norm so that clipping really triggers.
    probe = BertForQuestionAnswering(cfg)
    probe.load_state_dict(init_state)
    _, probe_norms, _ = train_steps(probe, batch, 1e9, torch.float64)
    max_norm = round(0.5 * min(probe_norms), 4)

    ref = BertForQuestionAnswering(cfg)
    ref.load_state_dict(init_state)
    (sl, el, loss, grads), norms, final = train_steps(ref, batch, max_norm, torch.float64)
    print(f"grad norms per step (float64): {', '.join(f'{n:.6f}' for n in norms)}; max_norm {max_norm}"
          f" -> clip coefficients {', '.join(f'{max_norm / (n + 1e-6):.4f}' for n in norms)}")
    assert all(max_norm / (n + 1e-6) < 1 for n in norms), "clipping must trigger at every step"

    # How far is PyTorch's own fp32 from the float64 answer?
    m32 = BertForQuestionAnswering(cfg)
    m32.load_state_dict(init_state)
    (sl32, el32, loss32, grads32), norms32, final32 = train_steps(m32, batch, max_norm, torch.float32)

    def worst(a, b, atol):
        a, b = a.double(), b.double()
        d = (a - b).abs()
        rel = (d / b.abs().clamp_min(1e-30))[b.abs() > atol]
        return float(d.max()), float(rel.max()) if rel.numel() else 0.0

    print("PyTorch fp32 vs the float64 reference (max abs, max rel over |ref| > atol):")
    print(f"  start_logits {worst(sl32, sl, 1e-6)}  loss {worst(loss32.reshape(1), loss.reshape(1), 1e-6)}")
    gw = max((worst(grads32[n], grads[n], 1e-7) for n in grads), key=lambda x: x[1])
    pw = max((worst(final32[n], final[n], 1e-7) for n in final), key=lambda x: x[1])
    print(f"  worst gradient {gw}  worst step3 parameter {pw}")

    ids, types, mask, start, end = batch
    tensors = {
        "input_ids": ids.to(torch.int32).numpy(),
        "token_type_ids": types.to(torch.int32).numpy(),
        "attention_mask": mask.to(torch.int32).numpy(),
        "start_positions": start.to(torch.int32).numpy(),
        "end_positions": end.to(torch.int32).numpy(),
        "start_logits": f32(sl),
        "end_logits": f32(el),
        "loss": f32(loss.reshape(1)),
        "grad_norm": np.array(norms, dtype=np.float32),
        "hparams": np.array([LR, WD, max_norm, WARMUP, TOTAL, EPS, B1, B2], dtype=np.float32),
        "shape": np.array([B, T], dtype=np.int32),
    }
    for n, g in grads.items():
        tensors["grad." + n] = f32(g)
    for n, p in final.items():
        tensors["step3." + n] = f32(p)
    meta = {"config": json.dumps(cfg.to_diff_dict()), "max_grad_norm": str(max_norm),
            "note": "float64 forward/backward/AdamW from float32 weights; dropout off"}
    path = os.path.join(args.out, "reference.safetensors")
    save_file(tensors, path, metadata=meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors); loss {float(loss):.6f}")
    print(f"lr per update: {[LR * (k / WARMUP if k < WARMUP else max(0.0, (TOTAL - k) / (TOTAL - WARMUP))) for k in range(STEPS)]}")


if __name__ == "__main__":
    main()
