#!/usr/bin/env python3
"""Per-op PyTorch reference tensors for tests/backend/test_ops_torch.c.

Every op of src/backend/backend.h is run in PyTorch (float32, CPU, one
thread) the way transformers' BertForQuestionAnswering and torch.optim.AdamW
run it, forward and backward, on small random inputs. Dropout masks are not
torch's: they are drawn with bertc's Philox stream (core/philox.h, written
again below) and applied the way torch applies its own (input * mask/(1-p)),
so the C op and the reference use the same mask.

Output, in tests/ref/ops/:
  ops.bin   the tensors, raw little-endian float32 / int32, one after another
  ops.txt   one line per tensor: NAME DTYPE COUNT OFFSET (DTYPE f32 or i32,
            OFFSET in bytes into ops.bin); lines starting with # are comments;
            "param NAME VALUE" lines carry the scalar settings.

Run from the repository root: python3 tools/make_ops_reference.py
"""
import argparse
import os

import numpy as np
import torch
from transformers.loss.loss_utils import ForQuestionAnsweringLoss

M32 = 0xFFFFFFFF

# Sizes: B batch, T sequence, NH heads, HS head size, C = NH*HS, I = 4C.
B, T, NH, HS = 2, 16, 4, 8
C = NH * HS
I = 4 * C
V, P, TV = 40, 20, 2
QB = 5  # rows of the QA loss case
P_ATTN = np.float32(0.1)
P_HIDDEN = np.float32(0.1)
LN_EPS = 1e-12


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on numpy uint64 arrays holding 32-bit values."""
    c0, c1, c2, c3 = (np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3))
    k0 = np.uint64(k0)
    k1 = np.uint64(k1)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        n0 = (p1 >> np.uint64(32)) ^ c1 ^ k0
        n2 = (p0 >> np.uint64(32)) ^ c3 ^ k1
        c0, c1, c2, c3 = n0, p1 & np.uint64(M32), n2, p0 & np.uint64(M32)
        k0 = (k0 + np.uint64(0x9E3779B9)) & np.uint64(M32)
        k1 = (k1 + np.uint64(0xBB67AE85)) & np.uint64(M32)
    return c0, c1, c2, c3


def philox_keep(seed, step, stream, n, p):
    """Element i of the stream is kept when its uniform >= p (philox_keep)."""
    i = np.arange(n, dtype=np.uint64)
    blk = i >> np.uint64(2)
    r = philox4x32(blk & np.uint64(M32), blk >> np.uint64(32), np.full(n, stream, np.uint64),
                   np.full(n, step, np.uint64), seed & M32, seed >> 32)
    lanes = np.stack(r, axis=1)[np.arange(n), (i & np.uint64(3)).astype(np.int64)]
    u = (lanes >> np.uint64(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return u >= p


def dropout_mask(keep, p):
    """What torch multiplies by: bernoulli(1-p) divided by (1-p)."""
    noise = torch.from_numpy(keep.astype(np.float32))
    return noise.div_(1 - float(p))


class Writer:
    def __init__(self):
        self.blobs = []
        self.lines = []
        self.offset = 0

    def add(self, name, t):
        a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype in (np.int64, np.int32):
            a, dt = a.astype("<i4"), "i32"
        else:
            a, dt = a.astype("<f4"), "f32"
        b = a.tobytes()
        self.lines.append(f"{name} {dt} {a.size} {self.offset}")
        self.blobs.append(b)
        self.offset += len(b)

    def param(self, name, value):
        self.lines.append(f"param {name} {value}")

    def write(self, outdir):
        os.makedirs(outdir, exist_ok=True)
        with open(os.path.join(outdir, "ops.bin"), "wb") as f:
            for b in self.blobs:
                f.write(b)
        with open(os.path.join(outdir, "ops.txt"), "w") as f:
            f.write("# made by tools/make_ops_reference.py with torch %s; NAME DTYPE COUNT OFFSET\n" % torch.__version__)
            for line in self.lines:
                f.write(line + "\n")


def leaf(x):
    return x.clone().requires_grad_(True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/ref/ops")
    args = ap.parse_args()
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    w = Writer()
    for k, v in dict(B=B, T=T, NH=NH, HS=HS, V=V, P=P, TV=TV, QB=QB).items():
        w.param(k, v)
    w.param("p_attn", repr(float(P_ATTN)))
    w.param("p_hidden", repr(float(P_HIDDEN)))
    w.param("ln_eps", repr(LN_EPS))

    # embeddings: (word + token type) + position, as BertEmbeddings
    ids = torch.randint(0, V, (B, T))
    ids[0, :4] = 3  # repeated ids
    types = (torch.arange(T) > T // 3).long().expand(B, T).contiguous()
    wte, wpe, wtt = leaf(torch.randn(V, C)), leaf(torch.randn(P, C) * 0.1), leaf(torch.randn(TV, C) * 0.1)
    pos = torch.arange(T).unsqueeze(0)
    emb = torch.nn.functional.embedding(ids, wte) + torch.nn.functional.embedding(types, wtt)
    emb = emb + torch.nn.functional.embedding(pos, wpe)
    demb = torch.randn(B, T, C)
    emb.backward(demb)
    for name, t in [("emb.ids", ids), ("emb.types", types), ("emb.wte", wte), ("emb.wpe", wpe), ("emb.wtt", wtt),
                    ("emb.out", emb), ("emb.dout", demb), ("emb.dwte", wte.grad), ("emb.dwpe", wpe.grad),
                    ("emb.dwtt", wtt.grad)]:
        w.add(name, t)

    # layernorm, eps 1e-12, with torch's saved mean and rstd
    x = leaf(emb.detach().reshape(B * T, C) * 2 + 0.5)
    lw, lb = leaf(1 + 0.1 * torch.randn(C)), leaf(0.1 * torch.randn(C))
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [C], lw, lb, LN_EPS)
    dout = torch.randn(B * T, C)
    out.backward(dout)
    for name, t in [("ln.inp", x), ("ln.w", lw), ("ln.b", lb), ("ln.out", out), ("ln.mean", mean.reshape(-1)),
                    ("ln.rstd", rstd.reshape(-1)), ("ln.dout", dout), ("ln.dinp", x.grad), ("ln.dw", lw.grad),
                    ("ln.db", lb.grad)]:
        w.add(name, t)

    # nn.Linear C -> I with bias, I -> C without
    for tag, cin, cout, bias in [("mm1", C, I, True), ("mm2", I, C, False)]:
        x = leaf(torch.randn(B * T, cin))
        lin = torch.nn.Linear(cin, cout, bias=bias)
        y = lin(x)
        dy = torch.randn(B * T, cout)
        y.backward(dy)
        w.add(tag + ".inp", x)
        w.add(tag + ".w", lin.weight)
        if bias:
            w.add(tag + ".b", lin.bias)
        w.add(tag + ".out", y)
        w.add(tag + ".dout", dy)
        w.add(tag + ".dinp", x.grad)
        w.add(tag + ".dw", lin.weight.grad)
        if bias:
            w.add(tag + ".db", lin.bias.grad)

    # exact GELU
    x = leaf(torch.randn(B * T, I) * 2)
    y = torch.nn.functional.gelu(x)
    dy = torch.randn(B * T, I)
    y.backward(dy)
    for name, t in [("gelu.inp", x), ("gelu.out", y), ("gelu.dout", dy), ("gelu.dinp", x.grad)]:
        w.add(name, t)

    # attention as transformers' eager_attention_forward, mask as finfo.min
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, T - 5:] = 0
    w.add("att.mask", mask)
    qkv = [torch.randn(B, T, C) for _ in range(3)]
    for name, t in zip(("att.q", "att.k", "att.v"), qkv):
        w.add(name, t)
    datt = torch.randn(B, T, C)
    w.add("att.dout", datt)
    seed, step, stream = 0x123456789AB, 5, 2 * 16 + 1
    w.param("att_seed", seed)
    w.param("att_step", step)
    w.param("att_stream", stream)
    for tag, p in [("att0", 0.0), ("att1", P_ATTN)]:
        q, k, v = (leaf(t) for t in qkv)
        heads = [t.view(B, T, NH, HS).transpose(1, 2) for t in (q, k, v)]
        add_mask = torch.where(mask[:, None, None, :] == 1, 0.0, torch.finfo(torch.float32).min)
        scores = torch.matmul(heads[0], heads[1].transpose(2, 3)) * (HS ** -0.5)
        scores = scores + add_mask
        probs = torch.nn.functional.softmax(scores, dim=-1)
        pd = probs
        if p > 0:
            keep = philox_keep(seed, step, stream, probs.numel(), p)
            pd = probs * dropout_mask(keep, p).view(probs.shape)
        ctx = torch.matmul(pd, heads[2]).transpose(1, 2).contiguous().view(B, T, C)
        ctx.backward(datt)
        for name, t in [("out", ctx), ("probs", probs), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)]:
            w.add(tag + "." + name, t)

    # hidden dropout
    seed2, step2, stream2 = 77, 3, 4 * 16 + 2
    w.param("drop_seed", seed2)
    w.param("drop_step", step2)
    w.param("drop_stream", stream2)
    x = leaf(torch.randn(B * T * C))
    keep = philox_keep(seed2, step2, stream2, x.numel(), P_HIDDEN)
    y = x * dropout_mask(keep, P_HIDDEN)
    dy = torch.randn(B * T * C)
    y.backward(dy)
    for name, t in [("drop.inp", x), ("drop.out", y), ("drop.dout", dy), ("drop.dinp", x.grad)]:
        w.add(name, t)

    # QA loss of BertForQuestionAnswering (transformers' ForQuestionAnsweringLoss)
    logits = leaf(torch.randn(QB, T, 2) * 3)
    start = torch.tensor([1, T + 4, -2, T - 1, T])  # normal, ignored, -> 0, last, ignored
    end = torch.tensor([2, T, 0, -7, 5])
    s_log, e_log = logits.split(1, dim=-1)
    loss = ForQuestionAnsweringLoss(s_log.squeeze(-1).contiguous(), e_log.squeeze(-1).contiguous(), start, end)
    loss.backward()
    for name, t in [("qa.logits", logits), ("qa.start", start), ("qa.end", end), ("qa.loss", loss.reshape(1)),
                    ("qa.dlogits", logits.grad)]:
        w.add(name, t)

    # torch.optim.AdamW, single-tensor path (the CPU default), three steps
    n = 1027
    # the settings as a user writes them; the C op gets them as floats
    lr, wd = 1e-3, 0.01
    param = torch.nn.Parameter(torch.randn(n))
    w.add("adamw.p0", param)
    opt = torch.optim.AdamW([param], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd, foreach=False,
                            fused=False)
    for step in range(1, 4):
        g = torch.randn(n) * (0.1 if step == 2 else 1.0)
        g[:5] = 0  # zero gradients
        param.grad = g.clone()
        opt.step()
        w.add("adamw.g%d" % step, g)
        w.add("adamw.p%d" % step, param)
        w.add("adamw.m%d" % step, opt.state[param]["exp_avg"])
        w.add("adamw.v%d" % step, opt.state[param]["exp_avg_sq"])
    w.param("adamw_lr", repr(lr))
    w.param("adamw_wd", repr(wd))

    w.write(args.out)
    print("wrote %s/ops.bin (%d bytes) and ops.txt (%d tensors)" % (args.out, w.offset, len(w.blobs)))


if __name__ == "__main__":
    main()
