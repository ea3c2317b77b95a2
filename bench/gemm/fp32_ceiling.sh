#!/usr/bin/env bash
# How fast can an fp32 training step be on this machine, at all? The
# ceiling against which the speed targets of bench/train_speed/step_vs_torch.sh and
# bench/train_speed/packed_vs_padded.sh are judged, measured in one run:
#
#   peak   the cores' fp32 multiply-add peak (bench/gemm/fma_peak.c: chains of
#          vector FMAs, no memory; 256-bit at ISA=avx2, the widest otherwise)
#   floor  a step's FLOPs / peak: the time of a step whose every product ran
#          at the peak and whose every other op (softmax, dropout, LayerNorm,
#          GELU, AdamW, ...) took no time; no fp32 implementation is faster
#   bertc  `bertc bench` (fp32), and the share of its CPU samples in the GEMM
#          (perf, when it runs: oneDNN's JIT code or libopenblas); that share
#          of its CPU time per step, over the threads, is the GEMM's time, and
#          gives the GEMM's own rate and the wall time of everything else
#   torch  transformers + SDPA (bench/train_speed/torch_step.py), padded to 384 as
#          run_qa.py does
#
# and prints, per case, the largest ratio over torch any fp32 step could
# reach (torch ms / floor ms) and the share of the peak the whole step must
# hold to meet the target ratio.
#
#   bash bench/gemm/fp32_ceiling.sh            # native ISA, 2 threads
#   ISA=avx2 bash bench/gemm/fp32_ceiling.sh   # both sides at the AVX2-only level
#   CASES="padded-minilm" PERF=0 bash bench/gemm/fp32_ceiling.sh
#
# Cases: padded-minilm (T 384, B 8, target 2.5x), packed-minilm (SQuAD dev
# window lengths, target 5x), packed-base (target 4x).
set -euo pipefail
cd "$(dirname "$0")/../.."

BERTC=${BERTC:-build/bertc}
STEPS=${STEPS:-4}
THREADS=${THREADS:-2}
CASES=${CASES:-padded-minilm packed-minilm packed-base}
PERF=${PERF:-auto}
[ -x "$BERTC" ] || { echo "fp32_ceiling.sh: $BERTC not found; build first or set BERTC" >&2; exit 2; }

source bench/lib/bench.sh && bench_isa # ISA=avx2|native
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -fopenmp bench/gemm/fma_peak.c -o "$out/fma_peak"
wide=avx2
if [ "${ISA:-native}" != avx2 ] && grep -qw avx512f /proc/cpuinfo; then wide=avx512; fi
if [ "$PERF" = auto ]; then
    if perf stat -e task-clock true >/dev/null 2>&1; then PERF=1; else PERF=0; fi
fi

echo "machine: $(lscpu | grep 'Model name' | sed 's/.*: *//'), $(nproc) cores visible; date $(date -u +%FT%TZ)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/fma_peak" "$wide" "$THREADS" | tee "$out/peak"

# bertc bench, under perf when asked: STEPS and 2*STEPS timed steps, so that
# the difference of the two sample counts is the timed steps alone (start-up,
# weight init and the warm-up step cancel).
run_bertc() { # name args...
    local name=$1
    shift
    env -u OPENBLAS_CORETYPE "$BERTC" bench "$@" --threads "$THREADS" --steps "$STEPS" --precision fp32 \
        --json >"$out/$name.json"
    if [ "$PERF" = 1 ]; then
        for s in "$STEPS" $((2 * STEPS)); do
            env -u OPENBLAS_CORETYPE perf record -q -F 499 -o "$out/$name.$s.perf" "$BERTC" bench "$@" \
                --threads "$THREADS" --steps "$s" --precision fp32 --json >/dev/null 2>&1
            perf report -q -i "$out/$name.$s.perf" --sort dso -F sample,dso -g none 2>/dev/null >"$out/$name.$s.dso"
        done
    fi
}
for c in $CASES; do
    case $c in
    padded-minilm) args=(--config minilm --seq 384 --batch 8) ;;
    packed-minilm) args=(--config minilm --seq 384 --batch 8 --lengths bench/squad_dev_lengths.txt --packing varlen) ;;
    packed-base) args=(--config base --seq 384 --batch 8 --lengths bench/squad_dev_lengths.txt --packing varlen) ;;
    *) echo "fp32_ceiling.sh: unknown case '$c' (padded-minilm, packed-minilm, packed-base)" >&2; exit 2 ;;
    esac
    echo "bertc bench ${args[*]} --threads $THREADS --steps $STEPS --precision fp32"
    run_bertc "$c" "${args[@]}"
    cfg=${args[1]}
    if [ ! -f "$out/torch-$cfg.json" ]; then
        echo "python3 bench/train_speed/torch_step.py --config $cfg --seq 384 --batch 8 --threads $THREADS --attn sdpa"
        python3 bench/train_speed/torch_step.py --config "$cfg" --seq 384 --batch 8 --threads "$THREADS" --steps "$STEPS" \
            --attn sdpa >"$out/torch-$cfg.json"
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$STEPS" "$PERF" $CASES <<'PY'
import json, os, sys
d, steps, perf, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
isa, threads, peak = open(f"{d}/peak").read().split()
peak = float(peak)
targets = {"padded-minilm": 2.5, "packed-minilm": 5.0, "packed-base": 4.0}

def gemm_share(name):
    """Share of the timed steps' CPU samples in GEMM code (oneDNN JIT, libdnnl, libopenblas)."""
    def counts(s):
        r = {}
        for line in open(f"{d}/{name}.{s}.dso"):
            f = line.split(None, 1)
            if len(f) == 2 and f[0].isdigit():
                r[f[1].strip()] = r.get(f[1].strip(), 0) + int(f[0])
        return r
    a, b = counts(steps), counts(2 * steps)
    diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    total = sum(diff.values())
    gemm = sum(v for k, v in diff.items() if k.startswith("[JIT]") or "dnnl" in k or "openblas" in k)
    return gemm / total if total > 0 else float("nan")

print(f"\nfp32 FMA peak: {peak:.1f} GFLOP/s ({isa} FMA, {threads} threads)")
b0 = json.loads(open(f"{d}/{cases[0]}.json").read())
print(f"bertc kernels: {b0.get('kernels')}")
print(f"\n{'case':<15}{'GFLOP/step':>11}{'floor ms':>10}{'bertc ms':>10}{'% peak':>8}{'GEMM GF/s':>10}"
      f"{'other ms':>9}{'torch ms':>10}{'bertc/torch':>12}{'ceiling':>9}{'target':>8}{'needs % peak':>13}")
for c in cases:
    b = json.loads(open(f"{d}/{c}.json").read())
    t = json.loads(open(f"{d}/torch-{b['config']}.json").read().strip().splitlines()[-1])
    flops, ms, tms = b["flops_per_step"], b["ms_per_step"], t["ms_per_step"]
    floor = flops / (peak * 1e9) * 1e3
    gemm_gf, other = float("nan"), float("nan")
    if perf:
        s = gemm_share(c)
        gemm_ms = s * b["cpu_ms_per_step"] / b["threads"]  # the GEMM runs on every thread
        gemm_gf, other = flops / (gemm_ms * 1e-3) * 1e-9, ms - gemm_ms
    tgt = targets[c]
    print(f"{c:<15}{flops * 1e-9:>11.1f}{floor:>10.1f}{ms:>10.1f}{100 * floor / ms:>7.1f}%{gemm_gf:>10.1f}"
          f"{other:>9.1f}{tms:>10.1f}{tms / ms:>11.2f}x{tms / floor:>8.2f}x{tgt:>7.1f}x{100 * tgt * floor / tms:>12.1f}%")
print("\nfloor: the step's FLOPs at the FMA peak with every other op free; ceiling = torch ms / floor ms,"
      "\nthe most any fp32 step can reach over torch here; needs % peak: the share of the FMA peak the whole"
      "\nstep must hold for the target ratio. GEMM GF/s and other ms from perf's samples of the timed steps.")
PY
