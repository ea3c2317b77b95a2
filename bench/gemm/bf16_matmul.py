"""torch.matmul in bf16 against fp32 at bertc's training shapes (M x N x K), on
the CPU: is bf16 a lever here? (bench/RESULTS.md, the oneDNN section). Prints
GFLOP/s, best of 7 after 3 warm-up calls, and the ratio.

    python3 bench/gemm/bf16_matmul.py [--threads 2]
"""
import argparse
import time
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

SHAPES = [(3072, 1536, 384), (3072, 384, 1536), (3072, 3072, 768), (1408, 768, 3072)]


def gflops(m, n, k, dtype):
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * m * n * k / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{args.threads} threads")
    for m, n, k in SHAPES:
        f32, bf16 = gflops(m, n, k, torch.float32), gflops(m, n, k, torch.bfloat16)
        print(f"{m}x{n}x{k}: fp32 {f32:.0f} GFLOP/s, bf16 {bf16:.0f} GFLOP/s, bf16/fp32 {bf16 / f32:.2f}")


if __name__ == "__main__":
    main()
