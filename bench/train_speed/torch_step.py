#!/usr/bin/env python3
"""The PyTorch side of bench/train_speed/step_vs_torch.sh: times full training steps of
transformers' BertForQuestionAnswering on random data, the same work as
`bertc bench`: forward with dropout on, backward, clip_grad_norm_(1.0),
AdamW (weight decay 0.01 without biases and LayerNorm), the linear schedule;
fp32 (or the forward under bf16 autocast, --autocast bf16), torch.set_num_threads(--threads). Prints one JSON line per attention
implementation with the fields of `bertc bench --json`.

FLOPs per step, as bertc counts them (asked of `bertc plan --json`): 6*(L*(4C^2+2CI)+2C)*B*T + 12*L*B*T^2*C.
"""
import argparse
import json
import os
import sys
import time

import torch
from transformers import BertConfig, BertForQuestionAnswering
from transformers.optimization import get_linear_schedule_with_warmup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bert_configs import CONFIGS, step_flops  # noqa: E402


def random_batch(B, T, V, gen):
    """Random ids, every other row padded over its last quarter, types 0 then 1, random labels."""
    ids = torch.randint(0, V, (B, T), generator=gen)
    types = torch.zeros(B, T, dtype=torch.long)
    mask = torch.ones(B, T, dtype=torch.long)
    start = torch.zeros(B, dtype=torch.long)
    end = torch.zeros(B, dtype=torch.long)
    for b in range(B):
        n = T - T // 4 if b % 2 else T
        ids[b, n:] = 0
        mask[b, n:] = 0
        types[b, T // 4 : n] = 1
        start[b] = int(torch.randint(0, n, (1,), generator=gen))
        end[b] = min(n - 1, int(start[b]) + int(torch.randint(0, 8, (1,), generator=gen)))
    return ids, types, mask, start, end


def run(args, attn):
    L, C, A, I = CONFIGS[args.config]
    cfg = BertConfig(vocab_size=args.vocab_size, hidden_size=C, num_hidden_layers=L, num_attention_heads=A,
                     intermediate_size=I, max_position_embeddings=max(512, args.seq), type_vocab_size=2,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, attn_implementation=attn)
    torch.manual_seed(args.seed)
    model = BertForQuestionAnswering(cfg).to(torch.float32)
    assert model.config._attn_implementation == attn, model.config._attn_implementation
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith(".bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith(".bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-5, betas=(0.9, 0.999), eps=1e-8)
    total = args.warmup_steps + args.steps + 1
    sched = get_linear_schedule_with_warmup(opt, 1, total)
    gen = torch.Generator().manual_seed(args.seed)
    ids, types, mask, start, end = random_batch(args.batch, args.seq, args.vocab_size, gen)

    times, losses, cpu = [], [], 0.0
    for k in range(args.warmup_steps + args.steps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=start,
                        end_positions=end)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        dt = time.perf_counter() - t0
        losses.append(float(out.loss.detach()))
        if k >= args.warmup_steps:
            times.append(dt)
            cpu += time.process_time() - c0
    mean = sum(times) / len(times)
    flops = float(step_flops(args.config, args.batch, args.seq))
    return {
        "impl": f"torch-{attn}" + ("-bf16" if args.autocast == "bf16" else ""),
        "backend": "cpu",
        "precision": "bf16 autocast" if args.autocast == "bf16" else "fp32",
        "config": args.config,
        "layers": L, "hidden": C, "heads": A, "intermediate": I, "vocab": args.vocab_size,
        "seq": args.seq,
        "batch": args.batch,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "threads": torch.get_num_threads(),
        "openblas_core": None,
        "torch": torch.__version__,
        "torch_blas": "mkl" if torch.backends.mkl.is_available() else "other",
        "blas": "MKL" if torch.backends.mkl.is_available() else "other BLAS",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "ms_per_step": round(1e3 * mean, 2),
        "ms_best": round(1e3 * min(times), 2),
        "examples_per_s": round(args.batch / mean, 4),
        "gflops": round(flops / mean * 1e-9, 2),
        "flops_per_step": flops,
        "flops_formula": "6*(L*(4C^2+2CI)+2C)*B*T + 12*L*B*T^2*C",
        "cpu_ms_per_step": round(1e3 * cpu / len(times), 2),
        "dropout": [0.1, 0.1],
        "loss_first": round(losses[0], 6),
        "loss_last": round(losses[-1], 6),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="minilm", choices=sorted(CONFIGS))
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup-steps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="0: torch's default")
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--attn", default="both", choices=["eager", "sdpa", "both"])
    ap.add_argument("--autocast", default="none", choices=["none", "bf16"],
                    help="bf16: the forward under torch.autocast('cpu', bfloat16); weights, grads, AdamW stay fp32")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    for attn in (["eager", "sdpa"] if args.attn == "both" else [args.attn]):
        print(json.dumps(run(args, attn)), flush=True)


if __name__ == "__main__":
    main()
