"""torch.matmul's side of bench/gemm/gemm_study.sh (the protocol of bench/gemm/gemm_study.c).

    python3 bench/gemm/gemm_torch.py info
    python3 bench/gemm/gemm_torch.py rowcheck THREADS...
    python3 bench/gemm/gemm_torch.py serve

serve answers each stdin line "gemm ID M N K TA TB BETA TH" with "T seconds"
of one call: C[M,N] = op(A) @ op(B) (+ C when BETA is 1). op(A) and op(B)
are views of stored matrices, as bertc's are (a transposed view is a stride
change, no copy); torch.matmul writes into a preallocated C (out=), and a
BETA 1 product is C.addmm_(A, B), the same GEMM with beta as bertc's
backward calls it. rowcheck prints whether a row of C is the same bits
computed alone (M = 1), inside 7 rows and inside 3,072.
"""
import sys
import time
import warnings

warnings.filterwarnings("ignore")  # torch without numpy warns at import
import torch  # noqa: E402


def info():
    blas = "MKL" if torch.backends.mkl.is_available() else "?"
    print(f"N torch torch {torch.__version__}, BLAS {blas}, CPU capability {torch.backends.cpu.get_cpu_capability()}")


def rowcheck(th):
    torch.set_num_threads(th)
    g = torch.Generator().manual_seed(5)
    x = torch.rand(3072, 1536, generator=g) * 2 - 1
    w = torch.rand(1536, 384, generator=g) * 2 - 1  # minilm's FFN weight (OC = 1536, C = 384)
    rows = [0, 1, 5, 1000, 3071]
    for name, a, b in (("fwd-NT(M,1536,384)", x[:, :384].contiguous(), w.t()), ("dgrad-NN(M,384,1536)", x, w)):
        big = torch.matmul(a, b)
        one = seven = 0
        for r in rows:
            one += bool(torch.equal(torch.matmul(a[r:r + 1], b)[0], big[r]))
            r0 = min(max(r - 3, 0), 3072 - 7)
            seven += bool(torch.equal(torch.matmul(a[r0:r0 + 7], b)[r - r0], big[r]))
        print(f"W torch {name} {th} {one}/{len(rows)} {seven}/{len(rows)}", flush=True)


def serve():
    key = a = b = c = None
    for line in sys.stdin:
        p = line.split()
        if len(p) != 9 or p[0] != "gemm":
            print(f"E bad request: {line.strip()}", flush=True)
            continue
        M, N, K, ta, tb, th = (int(v) for v in (p[2], p[3], p[4], p[5], p[6], p[8]))
        beta = float(p[7])
        if (M, N, K, ta, tb) != key:
            key = (M, N, K, ta, tb)
            a = (torch.rand(K, M) * 2 - 1).t() if ta else torch.rand(M, K) * 2 - 1
            b = (torch.rand(N, K) * 2 - 1).t() if tb else torch.rand(K, N) * 2 - 1
            c = torch.rand(M, N)
        torch.set_num_threads(th)
        t0 = time.perf_counter()
        if beta != 0:
            c.addmm_(a, b, beta=beta)
        else:
            torch.matmul(a, b, out=c)
        print(f"T {time.perf_counter() - t0:.9f}", flush=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    with torch.no_grad():
        if mode == "info":
            info()
        elif mode == "rowcheck":
            for th in sys.argv[2:]:
                rowcheck(int(th))
        elif mode == "serve":
            serve()
        else:
            sys.exit("usage: gemm_torch.py info | rowcheck THREADS... | serve")


if __name__ == "__main__":
    main()
