#!/usr/bin/env python3
"""The cuBLASLt calls of the CUDA backend, checked without a GPU.

cuda_gemm (src/backend/cuda/cuda_gemm.cu) computes, column-major,
    D(m x n) = alpha op(A) op(B) + beta D,  batched with element strides,
and the backend turns every row-major product into such a call. This script
emulates cuda_gemm with numpy on flat arrays (exactly the arguments the .cu
files pass: transposes, m, n, k, leading dimensions, strides, batch) and
checks each call sequence against the row-major formula it stands for:
matmul forward and backward (cuda_gemm.cu) and attention forward and
backward (cuda_attention.cu), including the per-head permutations.

Keep the CALLS below in step with the .cu files. Run: python3 tests/gpu/gemm_layouts.py
"""
import sys

import numpy as np


def gemm(ta, tb, m, n, k, A, lda, sA, B, ldb, sB, D, ldd, sD, batch, alpha, beta):
    """cuda_gemm on flat arrays (column-major, strided batches)."""
    for b in range(batch):
        ra, ca = (k, m) if ta else (m, k)
        rb, cb = (n, k) if tb else (k, n)
        a = np.array([[A[b * sA + i + j * lda] for j in range(ca)] for i in range(ra)])
        bb = np.array([[B[b * sB + i + j * ldb] for j in range(cb)] for i in range(rb)])
        opa = a.T if ta else a
        opb = bb.T if tb else bb
        prod = opa @ opb
        for j in range(n):
            for i in range(m):
                at = b * sD + i + j * ldd
                D[at] = alpha * prod[i, j] + beta * D[at]


def check(name, got, want):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
    ok = err < 1e-10
    print(f"{'PASS' if ok else 'FAIL'} {name}: max relative difference {err:.2e}")
    return ok


def matmul(rng):
    N, C, OC = 5, 7, 3
    inp, w, b = rng.standard_normal((N, C)), rng.standard_normal((OC, C)), rng.standard_normal(OC)
    dout = rng.standard_normal((N, OC))
    ok = True
    # forward: out = b then gemm(1, 0, OC, N, C, w, C, inp, C, out, OC, beta 1)
    out = np.tile(b, N).astype(float)
    gemm(1, 0, OC, N, C, w.ravel(), C, 0, inp.ravel(), C, 0, out, OC, 0, 1, 1.0, 1.0)
    ok &= check("matmul forward", out.reshape(N, OC), inp @ w.T + b)
    # dinp += gemm(0, 0, C, N, OC, w, C, dout, OC, dinp, C)
    dinp0 = rng.standard_normal((N, C))
    dinp = dinp0.ravel().copy()
    gemm(0, 0, C, N, OC, w.ravel(), C, 0, dout.ravel(), OC, 0, dinp, C, 0, 1, 1.0, 1.0)
    ok &= check("matmul backward dinp", dinp.reshape(N, C), dinp0 + dout @ w)
    # dw += gemm(0, 1, C, OC, N, inp, C, dout, OC, dw, C)
    dw0 = rng.standard_normal((OC, C))
    dw = dw0.ravel().copy()
    gemm(0, 1, C, OC, N, inp.ravel(), C, 0, dout.ravel(), OC, 0, dw, C, 0, 1, 1.0, 1.0)
    ok &= check("matmul backward dw", dw.reshape(OC, C), dw0 + dout.T @ inp)
    return ok


def attention(rng):
    B, T, NH, HS = 2, 5, 3, 4
    C = NH * HS
    q, k, v, dout = (rng.standard_normal((B, T, C)) for _ in range(4))
    mask = np.ones((B, T))
    mask[1, 3:] = 0
    scale = 1 / np.sqrt(HS)

    def heads(x):  # permute_in: (B,T,NH,HS) -> (B,NH,T,HS), flat
        return x.reshape(B, T, NH, HS).transpose(0, 2, 1, 3).ravel().copy()

    def unheads(x):  # permute_out: (B,NH,T,HS) -> (B,T,C)
        return x.reshape(B, NH, T, HS).transpose(0, 2, 1, 3).reshape(B, T, C)

    qh, kh, vh, dh = heads(q), heads(k), heads(v), heads(dout)
    BH, sq, st = B * NH, T * HS, T * T
    # reference, row-major per (b, h)
    Q, K, V, DO = (x.reshape(B, T, NH, HS).transpose(0, 2, 1, 3) for x in (q, k, v, dout))
    S = Q @ K.transpose(0, 1, 3, 2) * scale + np.where(mask[:, None, None, :] == 0, -1e30, 0)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    O = P @ V
    dP = DO @ V.transpose(0, 1, 3, 2)
    dV = P.transpose(0, 1, 3, 2) @ DO
    dS = (dP - (dP * P).sum(-1, keepdims=True)) * P * scale
    dQ = dS @ K
    dK = dS.transpose(0, 1, 3, 2) @ Q
    ok = True
    # scores: gemm(1, 0, T, T, HS, kh, HS, sq, qh, HS, sq, probs, T, st, BH, scale, 0)
    probs = np.zeros(BH * T * T)
    gemm(1, 0, T, T, HS, kh, HS, sq, qh, HS, sq, probs, T, st, BH, scale, 0.0)
    s = probs.reshape(B, NH, T, T) + np.where(mask[:, None, None, :] == 0, -1e30, 0)
    ok &= check("attention scores", s, S)
    p = P.ravel().copy()  # the softmax kernel's output
    # out: gemm(0, 0, HS, T, T, vh, HS, sq, P, T, st, oh, HS, sq, BH, 1, 0)
    oh = np.zeros(BH * T * HS)
    gemm(0, 0, HS, T, T, vh, HS, sq, p, T, st, oh, HS, sq, BH, 1.0, 0.0)
    ok &= check("attention out", unheads(oh), O.transpose(0, 2, 1, 3).reshape(B, T, C))
    # dP': gemm(1, 0, T, T, HS, vh, HS, sq, dh, HS, sq, scratch, T, st, BH, 1, 0)
    scratch = np.zeros(BH * T * T)
    gemm(1, 0, T, T, HS, vh, HS, sq, dh, HS, sq, scratch, T, st, BH, 1.0, 0.0)
    ok &= check("attention dP", scratch.reshape(B, NH, T, T), dP)
    # dV: gemm(0, 1, HS, T, T, dh, HS, sq, P, T, st, oh, HS, sq, BH, 1, 0)
    gemm(0, 1, HS, T, T, dh, HS, sq, p, T, st, oh, HS, sq, BH, 1.0, 0.0)
    ok &= check("attention dv", unheads(oh), dV.transpose(0, 2, 1, 3).reshape(B, T, C))
    ds = dS.ravel().copy()  # the softmax backward kernel's output
    # dQ: gemm(0, 0, HS, T, T, kh, HS, sq, dS, T, st, oh, HS, sq, BH, 1, 0)
    gemm(0, 0, HS, T, T, kh, HS, sq, ds, T, st, oh, HS, sq, BH, 1.0, 0.0)
    ok &= check("attention dq", unheads(oh), dQ.transpose(0, 2, 1, 3).reshape(B, T, C))
    # dK: gemm(0, 1, HS, T, T, qh, HS, sq, dS, T, st, oh, HS, sq, BH, 1, 0)
    gemm(0, 1, HS, T, T, qh, HS, sq, ds, T, st, oh, HS, sq, BH, 1.0, 0.0)
    ok &= check("attention dk", unheads(oh), dK.transpose(0, 2, 1, 3).reshape(B, T, C))
    return ok


def main():
    rng = np.random.default_rng(0)
    ok = matmul(rng) & attention(rng)
    print("all GEMM layouts agree" if ok else "a GEMM layout is wrong")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
