"""The driver and report of bench/gemm/gemm_study.sh (which builds the programs
and runs this): starts one process per library, asks each for the same
product in turn, and prints the markdown report.

    python3 bench/gemm/gemm_study.py BINDIR SHAPES FFN_SHAPES

BINDIR holds the gemm_study builds (openblas, dnnl, blis, fixed; the ones
that built). SHAPES has one product a line, "id M N K transa transb beta";
FFN_SHAPES "id M N K". Environment: REPS (timed calls per number, default
3), THREADS (default "1 2").

Timing: for each thread count and product, round 0 calls every library
once (the warm-up), then REPS rounds call every library once each, in an
order rotated each round; a number is the best of its REPS calls. Libraries
run one at a time but interleaved, so that a machine that gets busier or
quieter during the run affects every library of a row alike.
"""
import math
import os
import subprocess
import sys
import time

REPS = int(os.environ.get("REPS", "3"))
THREADS = [int(t) for t in os.environ.get("THREADS", "1 2").split()]

def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


FLAGS = cpu_flags()
AVX512 = "avx512f" in FLAGS and "avx512bw" in FLAGS and "avx512vl" in FLAGS
# Every OpenBLAS core this CPU can run, fastest level first.
CORES = (["Cooperlake"] if AVX512 and "avx512_bf16" in FLAGS else []) + (["SkylakeX"] if AVX512 else []) \
    + ["Haswell", "Zen", "Sandybridge", "Prescott"]
# On an AVX-512 CPU the other libraries run a second time held to AVX2, the
# level an AVX2-only CPU gets (each library's own cap).
AVX2_ENV = {"dnnl": {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "gemm_fixed": {"BERTC_CPU_ISA": "avx2"},
            "torch": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def env_with(**kv):
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    for k, v in kv.items():
        if v is not None:
            e[k] = v
    return e


class Worker:
    def __init__(self, label, argv, env, maxes):
        self.label, self.argv, self.env = label, argv, env
        self.p = subprocess.Popen(argv + ["serve"] + ([str(m) for m in maxes] if argv[0] != "python3" else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, text=True, bufsize=1)
        self.dead = None

    def ask(self, req):
        """Seconds of one call, or None."""
        if self.dead:
            return None
        try:
            self.p.stdin.write(req + "\n")
            self.p.stdin.flush()
            ans = self.p.stdout.readline().split()
        except (BrokenPipeError, OSError) as e:
            ans = ["E", str(e)]
        if len(ans) == 2 and ans[0] == "T":
            return float(ans[1])
        self.dead = " ".join(ans) or "exited"
        return None

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def one_shot(argv, env, *args):
    r = subprocess.run(argv + list(args), env=env, capture_output=True, text=True)
    return r.stdout.splitlines() + ([f"N {argv[-1]} {' '.join(args)} failed: {r.stderr.strip()[-200:]}"]
                                    if r.returncode else [])


def bertc_uses_onednn():
    """1 when `bertc version` (BERTC, else build/bertc) says its training GEMM is oneDNN."""
    exe = os.environ.get("BERTC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bertc")
    try:
        out = subprocess.run([exe, "version"], capture_output=True, text=True).stdout
    except OSError:
        return False
    return any(l.startswith("kernels:") and ", gemm oneDNN " in l for l in out.splitlines())


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v)) if v else None


def main():
    bindir, shapes_path, ffn_path = sys.argv[1:4]
    shapes = [l.split() for l in open(shapes_path) if l.strip()]
    ffn_shapes = [l.split() for l in open(ffn_path) if l.strip()]
    maxa = max(int(s[1]) * int(s[3]) for s in shapes + [[0, *f[1:4]] for f in ffn_shapes])
    maxb = max(int(s[2]) * int(s[3]) for s in shapes + [[0, *f[1:4]] for f in ffn_shapes])
    maxc = max(int(s[1]) * int(s[2]) for s in shapes + [[0, *f[1:4]] for f in ffn_shapes])
    maxa, maxb, maxc = (max(m, 3072 * 3072) for m in (maxa, maxb, maxc))

    have = lambda name: os.path.exists(os.path.join(bindir, name))  # noqa: E731
    binp = lambda name: [os.path.join(bindir, name)]  # noqa: E731
    # (process label, argv, env)
    procs = [("openblas", binp("openblas"), env_with())]
    procs += [(f"ob-{c}", binp("openblas"), env_with(OPENBLAS_CORETYPE=c)) for c in CORES]
    if have("dnnl"):
        procs.append(("dnnl", binp("dnnl"), env_with()))
    if have("blis"):
        procs.append(("blis", binp("blis"), env_with()))
    procs.append(("gemm_fixed", binp("fixed"), env_with()))
    torch_ok = subprocess.run(["python3", "-c", "import warnings; warnings.filterwarnings('ignore'); import torch"],
                              capture_output=True).returncode == 0
    here = os.path.dirname(os.path.abspath(__file__))
    if torch_ok:
        procs.append(("torch", ["python3", os.path.join(here, "gemm_torch.py")], env_with()))
    if AVX512:
        procs += [(f"{label}-avx2", argv, env_with(**AVX2_ENV[label])) for label, argv, _ in list(procs)
                  if label in AVX2_ENV]

    notes, rows_equal, verbose = [], [], []
    for label, argv, env in procs:
        env = dict(env, STUDY_LIB=label.replace("dnnl", "dnnl-sgemm", 1) if label.startswith("dnnl") else label)
        for l in one_shot(argv, env, "info"):
            notes.append(l[2:] if l.startswith("N ") else l)
        for l in one_shot(argv, env, "rowcheck", *map(str, THREADS)):
            if l.startswith("W "):
                r = l.split()[1:]
                if label.endswith("-avx2") and not r[0].endswith("-avx2"):
                    r[0] += "-avx2"
                rows_equal.append(r)
    if not torch_ok:
        notes.append("torch: not importable (pip install torch), no torch column")
    if have("dnnl"):
        # Which ISA oneDNN's JIT takes here, and which implementation each primitive gets.
        f0, s0 = ffn_shapes[0], shapes[0]
        reqs = (f"ffn matmul+bias+gelu {f0[0]} {f0[1]} {f0[2]} {f0[3]} 1\n"
                f"matmul {' '.join(s0)} 1\ngemm {' '.join(s0)} 1\n")
        r = subprocess.run(binp("dnnl") + ["serve", str(maxa), str(maxb), str(maxc)], input=reqs,
                           env=env_with(ONEDNN_VERBOSE="1"), capture_output=True, text=True)
        verbose = [l for l in r.stdout.splitlines() if l.startswith("onednn_verbose")]

    # Columns: (column label, process label, request kind, ffn variant)
    cols = [("openblas", "openblas", "gemm")] + [(f"ob-{c}", f"ob-{c}", "gemm") for c in CORES]
    if have("dnnl"):
        cols += [("dnnl-sgemm", "dnnl", "gemm"), ("dnnl-matmul", "dnnl", "matmul")]
    if have("blis"):
        cols.append(("blis", "blis", "gemm"))
    cols.append(("gemm_fixed", "gemm_fixed", "gemm"))
    if torch_ok:
        cols.append(("torch", "torch", "gemm"))
    if AVX512:
        if have("dnnl"):
            cols += [("dnnl-sgemm-avx2", "dnnl-avx2", "gemm"), ("dnnl-matmul-avx2", "dnnl-avx2", "matmul")]
        cols.append(("gemm_fixed-avx2", "gemm_fixed-avx2", "gemm"))
        if torch_ok:
            cols.append(("torch-avx2", "torch-avx2", "gemm"))
    ffn_cols = [("openblas sgemm", "openblas", "sgemm"), ("openblas sgemm+bias,gelu", "openblas", "sgemm+bias,gelu")]
    if have("dnnl"):
        ffn_cols += [("dnnl sgemm", "dnnl", "sgemm"), ("dnnl sgemm+bias,gelu", "dnnl", "sgemm+bias,gelu"),
                     ("dnnl matmul", "dnnl", "matmul"), ("dnnl matmul+bias", "dnnl", "matmul+bias"),
                     ("dnnl matmul+bias+gelu", "dnnl", "matmul+bias+gelu")]
    ffn_cols += [("gemm_fixed sgemm", "gemm_fixed", "sgemm"),
                 ("gemm_fixed sgemm+bias,gelu", "gemm_fixed", "sgemm+bias,gelu")]

    workers = {label: Worker(label, argv, env, (maxa, maxb, maxc)) for label, argv, env in procs}

    def measure(requests, th):
        """requests: list of (column, worker label, request line); the best seconds per column."""
        best = {}
        for rnd in range(REPS + 1):
            k = rnd % len(requests)
            for col, wl, req in requests[k:] + requests[:k]:
                t = workers[wl].ask(req)
                if rnd and t is not None:
                    best[col] = min(best.get(col, t), t)
                if th > 1:
                    # OpenMP threads spin for milliseconds after a parallel region
                    # (libgomp's default); let the last library's go idle first.
                    time.sleep(0.01)
        return best

    gflops = {}
    for th in THREADS:
        for s in shapes:
            sid, M, N, K = s[0], int(s[1]), int(s[2]), int(s[3])
            req = f"{' '.join(s)} {th}"
            best = measure([(c, wl, f"{kind} {req}") for c, wl, kind in cols], th)
            for c, t in best.items():
                gflops[(c, sid, th)] = 2.0 * M * N * K / t / 1e9
    ffn_ms = {}
    for th in THREADS:
        for f in ffn_shapes:
            best = measure([(c, wl, f"ffn {v} {' '.join(f)} {th}") for c, wl, v in ffn_cols], th)
            for c, t in best.items():
                ffn_ms[(c, f[0], th)] = t * 1e3
    for w in workers.values():
        if w.dead:
            notes.append(f"{w.label}: stopped answering ({w.dead})")
        w.close()

    report(notes, verbose, cols, shapes, gflops, ffn_cols, ffn_shapes, ffn_ms, rows_equal)


def report(notes, verbose, cols, shapes, gflops, ffn_cols, ffn_shapes, ffn_ms, rows_equal):
    print("\n## Libraries\n")
    for n in notes:
        print(f"- {n}")
    if verbose:
        isa = sorted({l.split(",", 3)[3] for l in verbose if ",info,cpu,isa" in l})
        ex = sorted({",".join(l.split(",")[3:6]) for l in verbose if ",exec," in l})
        print(f"- oneDNN verbose (ONEDNN_VERBOSE=1): {'; '.join(isa) or 'no ISA line'}; "
              f"implementations: {'; '.join(ex) or 'none printed'}")

    labels = [c[0] for c in cols]
    print("\n## GFLOP/s per product (ratio to the fastest in the row)\n")
    print("fwd: out[N,OC] = inp[N,C] @ w[OC,C]^T (NT); dgrad: dinp[N,C] += dout[N,OC] @ w (NN); "
          "wgrad: dw[OC,C] += dout^T @ inp (TN). Shape: model/N/product/OCxC; M x N x K as the GEMM sees it.\n")
    print("| shape | M x N x K | thr | " + " | ".join(labels) + " |")
    print("|---|---|---|" + "---|" * len(labels))
    ratios = {}
    for th in THREADS:
        for s in shapes:
            vals = {l: gflops.get((l, s[0], th)) for l in labels}
            have = [v for v in vals.values() if v]
            top = max(have) if have else 1
            cells = ["-" if v is None else f"{v:.1f} ({v / top:.2f})" for v in vals.values()]
            print(f"| {s[0]} | {s[1]}x{s[2]}x{s[3]} | {th} | " + " | ".join(cells) + " |")
            ref = vals.get("openblas")
            for l, v in vals.items():
                if v and ref:
                    ratios.setdefault((l, th, s[0].split("/")[2]), []).append(v / ref)

    prods = ["fwd", "dgrad", "wgrad"]
    print("\n## Against OpenBLAS as loaded: geometric mean of the GFLOP/s ratios\n")
    heads = [f"{p} {th}t" for th in THREADS for p in prods]
    print("| library | " + " | ".join(heads) + " | all |")
    print("|---|" + "---|" * (len(heads) + 1))
    for l in labels:
        cells, every = [], []
        for th in THREADS:
            for p in prods:
                r = ratios.get((l, th, p), [])
                every += r
                g = geomean(r)
                cells.append("-" if g is None else f"{g:.2f}")
        g = geomean(every)
        print(f"| {l} | " + " | ".join(cells) + f" | {'-' if g is None else f'{g:.2f}'} |")

    # The target: bertc's GEMM within 10 % of the fastest sgemm at the same shapes, per ISA level.
    amd = "GenuineIntel" not in open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else False
    below_native = ("ob-Haswell", "ob-Zen") if AVX512 else ()
    onednn = bertc_uses_onednn()
    levels = [("native", "dnnl-sgemm" if onednn else "openblas",
               [l for l in labels if not l.endswith("-avx2") and l not in below_native])]
    if AVX512:
        levels.append(("avx2", "dnnl-sgemm-avx2" if onednn else "ob-Zen" if amd else "ob-Haswell",
                       ["ob-Haswell", "ob-Zen"] + [l for l in labels if l.endswith("-avx2")]))
    print("\n## bertc's training GEMM against the fastest library at the same ISA level\n")
    print("Per product: bertc's GEMM (what `bertc version` says it uses: oneDNN's sgemm where libdnnl loads, else "
          "OpenBLAS with the core bertc picks at that level) over the fastest column of that level (slower levels' "
          "OpenBLAS cores excluded); geometric mean and the worst product.\n")
    print("| level | bertc uses | columns compared | " + " | ".join(heads) + " | all | worst |")
    print("|---|---|---|" + "---|" * (len(heads) + 2))
    for name, mine, pool in levels:
        pool = [l for l in pool if l in labels and l != "ob-Prescott" and l != "ob-Sandybridge"]
        cells, every, worst = [], [], (9.0, "")
        for th in THREADS:
            for p in prods:
                r = []
                for sh in shapes:
                    if sh[0].split("/")[2] != p:
                        continue
                    vals = [gflops.get((l, sh[0], th)) for l in pool]
                    v, best = gflops.get((mine, sh[0], th)), max([x for x in vals if x] or [0])
                    if v and best:
                        r.append(v / best)
                        worst = min(worst, (v / best, f"{sh[0]} {th}t"))
                every += r
                g = geomean(r)
                cells.append("-" if g is None else f"{g:.2f}")
        g = geomean(every)
        print(f"| {name} | {mine} | {', '.join(pool)} | " + " | ".join(cells) +
              f" | {'-' if g is None else f'{g:.2f}'} | {worst[0]:.2f} ({worst[1]}) |")

    print("\n## FFN up-projection with bias and erf GELU: milliseconds (lower is better)\n")
    print("sgemm: the GEMM alone. sgemm+bias,gelu: bias copied into C, GEMM with beta 1, then bertc's GELU loop "
          "as its own pass (bertc's CPU path). dnnl matmul+bias+gelu: one primitive, bias and an eltwise gelu_erf "
          "post-op fused. Last column: dnnl sgemm+bias,gelu minus dnnl matmul+bias+gelu.\n")
    fl = [c[0] for c in ffn_cols]
    print("| shape | thr | " + " | ".join(fl) + " | fused saves |")
    print("|---|---|" + "---|" * (len(fl) + 1))
    for th in THREADS:
        for f in ffn_shapes:
            v = [ffn_ms.get((c, f[0], th)) for c in fl]
            unf, fus = ffn_ms.get(("dnnl sgemm+bias,gelu", f[0], th)), ffn_ms.get(("dnnl matmul+bias+gelu", f[0], th))
            save = f"{unf - fus:.1f} ms ({(unf - fus) / unf * 100:.0f} %)" if unf and fus else "-"
            print(f"| {f[0]} | {th} | " + " | ".join("-" if x is None else f"{x:.1f}" for x in v) + f" | {save} |")

    print("\n## Is a row's result independent of M?\n")
    print("Rows 0, 1, 5, 1000 and 3071 of a product computed with M = 3072, then each alone (M = 1) and inside 7 "
          "rows: how many are the same bits.\n")
    print("| library | product (M, N, K) | thr | alone (M=1) | inside 7 rows |")
    print("|---|---|---|---|---|")
    for r in rows_equal:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |")


if __name__ == "__main__":
    main()
