#!/usr/bin/env python3
"""PyTorch + transformers' side of bench/gpu/gpu_vs_torch.sh.

BertForQuestionAnswering (random weights, SDPA attention) trained on random
batches shaped like bertc's benchmark (every other row padded over its last
quarter): AdamW (fused), autocast in bf16 or fp16 (fp16 with GradScaler), as
run_qa.py does with --bf16 / --fp16. Prints one JSON line:

  timing  (default): examples/s over --steps timed steps after --warmup,
          peak memory (torch.cuda.max_memory_allocated and _reserved),
          FLOPs per step as bertc counts them (bertc plan --json) and MFU
          against the GPU's dense bf16/fp16 Tensor Core peak (when known).
  --maxbatch: the largest batch that trains (two steps, so AdamW's state
          exists) with torch.cuda.set_per_process_memory_fraction capping
          the caching allocator at --limit (the CUDA context is outside
          it, as it is outside bertc's --gpu-mem-limit).

Exit status: 0 measured, 3 no CUDA in this torch, 4 out of memory (timing).
"""
import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bert_configs import CONFIGS, step_flops  # noqa: E402

# Dense (no sparsity) bf16/fp16 Tensor Core peaks in TFLOPS, from NVIDIA's
# data sheets; matched in order against the device name.
PEAKS = [
    ("H200 NVL", 835.0),
    ("H200", 989.4),
    ("H100 NVL", 835.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.4),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("T4", 65.0),
]


def peak_tflops(name):
    for key, peak in PEAKS:
        if key in name:
            return peak
    return None


def parse_size(s):
    units = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for u in sorted(units, key=len, reverse=True):
        if u and s.endswith(u):
            return int(float(s[: -len(u)]) * units[u])
    return int(float(s))


def random_batch(torch, batch, seq, vocab, device, seed=42):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    types = torch.zeros(batch, seq, dtype=torch.long)
    types[:, seq // 4 :] = 1
    for b in range(1, batch, 2):
        n = seq - seq // 4
        ids[b, n:] = 0
        mask[b, n:] = 0
        types[b, n:] = 0
    start = torch.randint(0, seq - seq // 4, (batch,), generator=g)
    end = torch.clamp(start + torch.randint(0, 8, (batch,), generator=g), max=seq - seq // 4 - 1)
    to = lambda t: t.to(device)  # noqa: E731
    return dict(input_ids=to(ids), attention_mask=to(mask), token_type_ids=to(types),
                start_positions=to(start), end_positions=to(end))


def build(torch, args, device):
    from transformers import BertConfig, BertForQuestionAnswering

    layers, hidden, heads, inter = CONFIGS[args.config]
    cfg = BertConfig(vocab_size=args.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter, max_position_embeddings=512)
    try:
        model = BertForQuestionAnswering._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError):
        cfg._attn_implementation = "sdpa"
        model = BertForQuestionAnswering(cfg)
    model.to(device).train()
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01, fused=fused)
    return model, opt, (layers, hidden, inter)


def train_steps(torch, model, opt, scaler, batch, dtype, device, n):
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(**batch).loss
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="base", choices=sorted(CONFIGS))
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--seq", type=int, default=384)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--maxbatch", action="store_true", help="find the largest batch under --limit")
    ap.add_argument("--limit", default="16GiB", help="memory cap for --maxbatch")
    ap.add_argument("--device", default="cuda", help="cuda (cpu only to test this script)")
    args = ap.parse_args()

    import torch

    base = {"impl": "pytorch", "torch": torch.__version__, "config": args.config, "seq": args.seq,
            "precision": args.precision, "attention": "sdpa"}
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({**base, "error": "torch.cuda.is_available() is False"}))
        return 3
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    base["gpu"] = name
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.precision]
    torch.manual_seed(0)

    def attempt(batch_size, steps):
        model = opt = batch = None
        try:
            model, opt, dims = build(torch, args, device)
            scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 and device.type == "cuda" else None
            batch = random_batch(torch, batch_size, args.seq, args.vocab_size, device)
            train_steps(torch, model, opt, scaler, batch, dtype, device, steps)
            if device.type == "cuda":
                torch.cuda.synchronize()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            del model, opt, batch
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()

    if args.maxbatch:
        limit = parse_size(args.limit)
        if device.type == "cuda":
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), 0)
        lo, hi = 0, 8
        while attempt(hi, 2):
            lo, hi = hi, hi * 2
            if hi > 4096:
                break
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if attempt(mid, 2):
                lo = mid
            else:
                hi = mid
        print(json.dumps({**base, "limit_bytes": limit, "largest_micro_batch": lo}))
        return 0

    model, opt, (layers, hidden, inter) = build(torch, args, device)
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 and device.type == "cuda" else None
    batch = random_batch(torch, args.batch, args.seq, args.vocab_size, device)
    try:
        train_steps(torch, model, opt, scaler, batch, dtype, device, args.warmup)
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        loss = train_steps(torch, model, opt, scaler, batch, dtype, device, args.steps)
        if device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    except torch.OutOfMemoryError:
        print(json.dumps({**base, "batch": args.batch, "error": "out of memory"}))
        return 4
    flops = step_flops(args.config, args.batch, args.seq)
    out = {**base, "batch": args.batch, "steps": args.steps, "step_ms": 1e3 * dt / args.steps,
           "examples_per_s": args.batch * args.steps / dt, "flops_per_step": flops,
           "tflops": flops * args.steps / dt / 1e12, "loss": float(loss.detach()),
           "attention": getattr(model.config, "_attn_implementation", "unknown")}
    if device.type == "cuda":
        out["peak_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    peak = peak_tflops(name)
    if peak and dtype != torch.float32:
        out["mfu"] = out["tflops"] / peak
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
