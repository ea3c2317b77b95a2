#!/usr/bin/env bash
# The ceiling of a training step on this machine's CPUs: sgemm GFLOP/s at the
# shapes of a packed bert-base micro-batch (8 SQuAD windows, 1,408 real
# tokens: the linear layers forward, and backward's two products each), in
# OpenBLAS as bertc links it and in torch.matmul, in the same run, on the same
# threads. A training step is ~95 % such products, so examples/s cannot pass
# GFLOP/s / (FLOPs per example); bench/RESULTS.md turns that into the most a
# packed base step can reach against torch's padded one.
#
#   bash bench/gemm/gemm_peak.sh [THREADS] [TOKENS]
set -euo pipefail
THREADS=${1:-$(nproc)}
TOKENS=${2:-1408}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/g.c" <<'C'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv)
{
    int N = atoi(argv[1]);
    /* (rows, in, out) of base's linears: q/k/v/out 768->768, ffn in 768->3072, ffn out 3072->768 */
    int shapes[3][2] = {{768, 768}, {768, 3072}, {3072, 768}};
    int reps[3] = {4, 1, 1};
    float *a = malloc(sizeof(float) * N * 3072), *w = malloc(sizeof(float) * 3072 * 3072), *c = malloc(sizeof(float) * N * 3072), *dw = malloc(sizeof(float) * 3072 * 3072);
    for (long i = 0; i < (long)N * 3072; i++) a[i] = (float)((i * 7) % 13) * 0.01f, c[i] = 0;
    for (long i = 0; i < 3072L * 3072; i++) w[i] = (float)((i * 5) % 11) * 0.01f;
    double best = 0, flops_all = 0, t_all = 0;
    for (int round = 0; round < 4; round++) {
        double f = 0, t0 = now();
        for (int s = 0; s < 3; s++)
            for (int r = 0; r < reps[s]; r++) {
                int K = shapes[s][0], M = shapes[s][1];
                /* forward y = x W^T, backward dx = dy W and dW = dy^T x */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1, a, K, w, K, 0, c, M);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, M, 1, c, M, w, K, 0, dw + 0, K);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, K, N, 1, c, M, a, K, 0, dw, K);
                f += 3 * 2.0 * N * K * M;
            }
        double t = now() - t0;
        if (round > 0) { flops_all += f; t_all += t; if (f / t > best) best = f / t; }
    }
    printf("%.1f %.1f\n", flops_all / t_all / 1e9, best / 1e9);
    return 0;
}
C
gcc -O2 "$tmp/g.c" -o "$tmp/g" -lopenblas
read -r ob_mean ob_best < <(env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS="$THREADS" "$tmp/g" "$TOKENS")
read -r th_mean th_best < <(python3 - "$THREADS" "$TOKENS" <<'PY'
import sys, time, torch
th, N = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(th)
a = torch.rand(N, 3072); w = torch.rand(3072, 3072)
shapes, reps = [(768, 768), (768, 3072), (3072, 768)], [4, 1, 1]
best = tot_f = tot_t = 0.0
for rnd in range(4):
    f = 0.0; t0 = time.perf_counter()
    for (K, M), r in zip(shapes, reps):
        x, W = a[:, :K].contiguous(), w[:M, :K].contiguous()
        for _ in range(r):
            y = x @ W.t(); dx = y @ W; dW = y.t() @ x
            f += 3 * 2.0 * N * K * M
    t = time.perf_counter() - t0
    if rnd > 0:
        tot_f += f; tot_t += t; best = max(best, f / t)
print(f"{tot_f / tot_t / 1e9:.1f} {best / 1e9:.1f}")
PY
)
echo "sgemm at a packed bert-base micro-batch's shapes ($TOKENS tokens), $THREADS threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1 /proc/loadavg)"
echo "OpenBLAS (bertc's): mean $ob_mean GFLOP/s, best round $ob_best"
echo "torch.matmul $(python3 -c 'import torch; print(torch.__version__)'): mean $th_mean GFLOP/s, best round $th_best"
