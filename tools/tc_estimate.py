#!/usr/bin/env python3
"""An estimate, not a measurement: bytes, FLOPs and time at a T4's peaks of one
training step of BERT-base (L12 H768 NH12 FF3072) on a padded batch of 32
windows of 384 tokens, dropout 0.1, fp16 GEMMs, for today's CUDA step and the
Tensor Core one of issue 47 (docs/DESIGN.md, "The CUDA step for Tensor Cores:
estimate", prints its tables).

Each kernel's time is max(bytes / 320 GB/s, FLOPs / peak): 65 TFLOP/s for
Tensor Core products, 8.1 TFLOP/s fp32 for CUDA-core arithmetic, and 4.07
Tops/s of 32-bit integer work for Philox (25 integer ops per dropout draw: 10
rounds of 2 multiplies and 6 adds/xors per 4 draws, rounded up). Bytes are
DRAM bytes with perfect caching inside a kernel (a tile re-read from L2 is
not counted) and none between kernels. Launch gaps are not in the times; the
launch counts are given."""

BW, TC, F32, INT = 320e9, 65e12, 8.1e12, 4.07e12
B, T, C, I, NH, L, VOCAB = 32, 384, 768, 3072, 12, 12, 30522
HS = C // NH
N = B * T
NC, NI, CC, CI = N * C, N * I, C * C, C * I
TT = B * NH * T * T  # scores of a layer
P = VOCAB * C + 512 * C + 2 * C + 2 * C + L * (4 * CC + 4 * C + 2 * CI + I + C + 4 * C) + 2 * C + 2
PHILOX = 25  # integer ops per draw


class Kernel:
    def __init__(self, group, name, rd, wr, tc=0.0, f32=0.0, draws=0.0, launches=1):
        self.group, self.name, self.rd, self.wr = group, name, rd, wr
        self.tc, self.f32, self.draws, self.launches = tc, f32, draws, launches

    def time(self):
        return max((self.rd + self.wr) / BW, self.tc / TC, self.f32 / F32, self.draws * PHILOX / INT)


def today_matmul_fwd(g, n, cin, oc):
    return [Kernel(g, "bias fill", 0, 4 * n * oc),
            Kernel(g, "convert x", 4 * n * cin, 2 * n * cin),
            Kernel(g, "convert w", 4 * oc * cin, 2 * oc * cin),
            Kernel(g, "GEMM (beta 1 on the bias)", 2 * n * cin + 2 * oc * cin + 4 * n * oc, 4 * n * oc,
                   tc=2 * n * cin * oc)]


def today_matmul_bwd(g, n, cin, oc, zero_dinp=True):
    k = [Kernel(g, "zero dinp", 0, 4 * n * cin)] if zero_dinp else []
    return k + [Kernel(g, "bias grad (2 stages)", 4 * n * oc, 0, launches=2),
                Kernel(g, "convert dout", 4 * n * oc, 2 * n * oc),
                Kernel(g, "convert w", 4 * oc * cin, 2 * oc * cin),
                Kernel(g, "convert x", 4 * n * cin, 2 * n * cin),
                Kernel(g, "GEMM dinp +=", 2 * oc * cin + 2 * n * oc + 4 * n * cin, 4 * n * cin, tc=2 * n * cin * oc),
                Kernel(g, "GEMM dw +=", 2 * n * cin + 2 * n * oc + 4 * oc * cin, 4 * oc * cin, tc=2 * n * cin * oc)]


def today_layer():
    f, b = [], []
    for _ in range(3):
        f += today_matmul_fwd("fwd: Q, K, V linear (3 ops)", N, C, C)
    g = "fwd: attention (batched GEMMs, fp32 probs)"
    f += [Kernel(g, "permute q, k, v in", 3 * 4 * NC, 3 * 2 * NC, launches=3),
          Kernel(g, "GEMM S", 4 * NC, 4 * TT, tc=2 * TT * HS),
          Kernel(g, "softmax", 4 * TT, 4 * TT),
          Kernel(g, "dropout + convert P", 4 * TT, 2 * TT, draws=TT),
          Kernel(g, "GEMM P V", 2 * TT + 2 * NC, 4 * NC, tc=2 * TT * HS),
          Kernel(g, "permute out", 4 * NC, 4 * NC)]
    f += today_matmul_fwd("fwd: attention output linear", N, C, C)
    for g in ("fwd: dropout, residual, LayerNorm (x2)",):
        for _ in range(2):
            f += [Kernel(g, "dropout", 4 * NC, 4 * NC, draws=NC), Kernel(g, "add", 8 * NC, 4 * NC),
                  Kernel(g, "LayerNorm", 4 * NC, 4 * NC + 8 * N)]
    f += today_matmul_fwd("fwd: FFN in linear", N, C, I)
    f += [Kernel("fwd: GELU", "gelu", 4 * NI, 4 * NI, f32=20 * NI)]
    f += today_matmul_fwd("fwd: FFN out linear", N, I, C)

    g = "bwd: LayerNorm, dropout (x2)"
    for _ in range(2):
        b += [Kernel(g, "zero", 0, 4 * NC), Kernel(g, "LayerNorm dinp +=", 12 * NC, 4 * NC),
              Kernel(g, "LayerNorm dw, db (2 stages)", 8 * NC, 0, launches=2),
              Kernel(g, "dropout", 4 * NC, 4 * NC, draws=NC)]
    b += today_matmul_bwd("bwd: FFN out linear", N, I, C)
    b += [Kernel("bwd: GELU", "zero", 0, 4 * NI), Kernel("bwd: GELU", "gelu backward +=", 12 * NI, 4 * NI, f32=25 * NI)]
    b += today_matmul_bwd("bwd: FFN in linear", N, C, I, zero_dinp=False)
    b += today_matmul_bwd("bwd: attention output linear", N, C, C)
    g = "bwd: attention (batched GEMMs, fp32 probs)"
    b += [Kernel(g, "zero dq, dk, dv", 0, 12 * NC, launches=3),
          Kernel(g, "permute dout, q, k, v in", 4 * 4 * NC, 4 * 2 * NC, launches=4),
          Kernel(g, "GEMM dP'", 4 * NC, 4 * TT, tc=2 * TT * HS),
          Kernel(g, "dropout + convert P", 4 * TT, 2 * TT, draws=TT),
          Kernel(g, "GEMM dV", 2 * NC + 2 * TT, 4 * NC, tc=2 * TT * HS),
          Kernel(g, "softmax backward", 8 * TT, 2 * TT, draws=TT),
          Kernel(g, "GEMM dQ, GEMM dK", 2 * (2 * NC + 2 * TT), 2 * 4 * NC, tc=2 * 2 * TT * HS, launches=2),
          Kernel(g, "permute dq, dk, dv out +=", 3 * 8 * NC, 3 * 4 * NC, launches=3)]
    for _ in range(3):
        b += today_matmul_bwd("bwd: Q, K, V linear (3 ops)", N, C, C, zero_dinp=False)
    return f, b


def new_layer():
    f, b = [], []
    f += [Kernel("fwd: QKV linear, one GEMM + BIAS epilogue", "GEMM", 2 * NC + 6 * CC, 6 * NC, tc=6 * N * CC)]
    f += [Kernel("fwd: flash attention (WMMA, 16-bit)", "flash forward", 6 * NC, 2 * NC + 4 * N * NH,
                 tc=4 * TT * HS, f32=4 * TT, draws=TT)]
    f += [Kernel("fwd: attention output linear + BIAS", "GEMM", 2 * NC + 2 * CC, 2 * NC, tc=2 * N * CC)]
    for _ in range(2):
        f += [Kernel("fwd: dropout+residual+LayerNorm, fused (x2)", "fused", 4 * NC, 2 * NC + 4 * N, draws=NC)]
    f += [Kernel("fwd: FFN in linear + BIAS", "GEMM", 2 * NC + 2 * CI, 2 * NI, tc=2 * N * CI)]
    f += [Kernel("fwd: GELU (erf, 16-bit)", "gelu", 2 * NI, 2 * NI, f32=20 * NI)]
    f += [Kernel("fwd: FFN out linear + BIAS", "GEMM", 2 * NI + 2 * CI, 2 * NC, tc=2 * N * CI)]

    for _ in range(2):
        b += [Kernel("bwd: LayerNorm+residual+dropout, fused (x2)", "fused", 4 * NC, 4 * NC, draws=NC),
              Kernel("bwd: LayerNorm+residual+dropout, fused (x2)", "dw, db partials summed", 0, 0)]
    g = "bwd: FFN out linear (dW GEMM + BGRADB)"
    b += [Kernel(g, "GEMM dinp", 2 * NC + 2 * CI, 2 * NI, tc=2 * N * CI),
          Kernel(g, "GEMM dw += + BGRADB", 2 * NI + 2 * NC + 4 * CI, 4 * CI, tc=2 * N * CI)]
    b += [Kernel("bwd: GELU (16-bit, =)", "gelu backward", 4 * NI, 2 * NI, f32=25 * NI)]
    g = "bwd: FFN in linear (dW GEMM + BGRADB)"
    b += [Kernel(g, "GEMM dinp += (16-bit C)", 2 * NI + 2 * CI + 2 * NC, 2 * NC, tc=2 * N * CI),
          Kernel(g, "GEMM dw += + BGRADB", 2 * NC + 2 * NI + 4 * CI, 4 * CI, tc=2 * N * CI)]
    g = "bwd: attention output linear (+ BGRADB)"
    b += [Kernel(g, "GEMM dinp", 2 * NC + 2 * CC, 2 * NC, tc=2 * N * CC),
          Kernel(g, "GEMM dw += + BGRADB", 4 * NC + 4 * CC, 4 * CC, tc=2 * N * CC)]
    g = "bwd: flash attention (3 kernels, P recomputed)"
    b += [Kernel(g, "D = rowsum(dO O)", 4 * NC, 4 * N * NH),
          Kernel(g, "dK, dV", 8 * NC, 4 * NC, tc=8 * TT * HS, f32=6 * TT, draws=TT),
          Kernel(g, "dQ", 8 * NC, 2 * NC, tc=6 * TT * HS, f32=6 * TT, draws=TT)]
    g = "bwd: QKV linear, one op (+ BGRADB)"
    b += [Kernel(g, "GEMM dinp += (16-bit C)", 6 * NC + 6 * CC + 2 * NC, 2 * NC, tc=6 * N * CC),
          Kernel(g, "GEMM dw += + BGRADB", 8 * NC + 12 * CC, 12 * CC, tc=6 * N * CC)]
    return f, b


def step_extra(new):
    k = []
    g = "step: embeddings, QA head, loss"
    if new:
        k += [Kernel(g, "embedding + LayerNorm + dropout", 3 * 2 * NC, 2 * NC, draws=NC),
              Kernel(g, "embedding backward (sort, gathers)", 16 * NC, 4 * NC, launches=8)]
    else:
        k += [Kernel(g, "embedding, LayerNorm, dropout", 12 * NC + 8 * NC, 12 * NC, draws=NC, launches=3),
              Kernel(g, "embedding backward (sort, gathers)", 24 * NC, 8 * NC, launches=10)]
    k += [Kernel(g, "QA head, loss (fwd + bwd)", 8 * NC, 2 * NC, tc=6 * N * C * 2, launches=8)]
    g = "step: optimizer"
    if new:
        k += [Kernel(g, "zero gradients", 0, 4 * P),
              Kernel(g, "sum of squares (2 stages)", 4 * P, 0, launches=2),
              Kernel(g, "AdamW, one multi-tensor launch (+16-bit copy)", 16 * P, 14 * P, f32=20 * P)]
    else:
        k += [Kernel(g, "zero gradients", 0, 4 * P),
              Kernel(g, "sum of squares (2 stages)", 4 * P, 0, launches=2),
              Kernel(g, "AdamW, 148 launches (decay runs)", 16 * P, 12 * P, f32=20 * P, launches=148)]
    return k


def groups(ks):
    out = {}
    for k in ks:
        r = out.setdefault(k.group, [0, 0.0, 0.0, 0.0])
        r[0] += k.launches
        r[1] += k.rd + k.wr
        r[2] += k.tc + k.f32
        r[3] += k.time()
    return out


def table(title, ks, what):
    print(f"\n{title}\n")
    print(f"| kernels ({what}) | launches | MB read + written | GFLOP | ms at peak |")
    print("|---|---:|---:|---:|---:|")
    tot = [0, 0.0, 0.0, 0.0]
    for g, (n, by, fl, t) in groups(ks).items():
        print(f"| {g} | {n} | {by / 1e6:,.0f} | {fl / 1e9:,.1f} | {t * 1e3:.2f} |")
        for i, v in enumerate((n, by, fl, t)):
            tot[i] += v
    print(f"| **{'one layer' if what.startswith('per') else 'per step'}** | **{tot[0]}** | **{tot[1] / 1e6:,.0f}** | **{tot[2] / 1e9:,.1f}** | **{tot[3] * 1e3:.2f}** |")
    return tot


def design(name, layer, new):
    f, b = layer()
    ks = f + b
    tl = table(f"{name}: one encoder layer, forward and backward", ks, "per layer; x%d" % L)
    ex = step_extra(new)
    te = table(f"{name}: once per step", ex, "once per step")
    launches = tl[0] * L + te[0]
    by = tl[1] * L + te[1]
    fl = tl[2] * L + te[2]
    t = tl[3] * L + te[3]
    tc_t = sum(k.tc for k in ks) * L / TC
    print(f"\n{name}: the step: {launches} launches, {by / 1e9:.1f} GB, {fl / 1e12:.2f} TFLOP, "
          f"{t * 1e3:.0f} ms at the card's peaks (Tensor Core products alone: {tc_t * 1e3:.0f} ms)")
    return launches, by, fl, t


def saved_activations(new):
    """Bytes one layer keeps from forward for backward."""
    if new:  # 16-bit: qkv, ctx, h1, layer output, GELU input and output; lse; LayerNorm rstd
        return 2 * (3 * NC + NC + NC + NC + 2 * NI) + 4 * N * NH + 2 * 4 * N
    # fp32: q, k, v, ctx, res1, h1, res2, GELU input and output, probs, LayerNorm mean and rstd
    return 4 * (7 * NC + 2 * NI + TT) + 4 * 4 * N


if __name__ == "__main__":
    print(f"BERT-base, B {B} x T {T} (N {N}), P {P / 1e6:.1f} M parameters, T4: 65 TFLOP/s fp16 TC, "
          f"8.1 TFLOP/s fp32, 320 GB/s")
    a = design("today", today_layer, False)
    n = design("Tensor Core step", new_layer, True)
    for nm, nw in (("today", False), ("Tensor Core step", True)):
        print(f"\n{nm}: saved activations {saved_activations(nw) / 1e6:,.0f} MB a layer, "
              f"{saved_activations(nw) * L / 1e9:.1f} GB for {L} layers")
    print(f"\nratio: launches {a[0] / n[0]:.1f}x, bytes {a[1] / n[1]:.1f}x, time at peak {a[3] / n[3]:.1f}x")
