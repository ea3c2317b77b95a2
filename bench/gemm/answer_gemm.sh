#!/usr/bin/env bash
# The linear layers of answers on the CPU against the machine's limits: the
# int8 (VPDPBUSD) and bf16 (VDPBF16PS) peaks of bench/gemm/int8_peak.c and
# the fp32 FMA peak of bench/gemm/fma_peak.c, and bertc's int8 and bf16
# inference kernels (gemm_int8, gemm_bf16) beside the fp32 products bertc has
# (gemm_fixed, which predict and serve use today; OpenBLAS's sgemm; oneDNN's
# sgemm where it loads) at the layer shapes of minilm (C/OC 384 x 384,
# 384 x 1536, 1536 x 384) and base (768, 3072) for N packed tokens
# (bench/gemm/answer_gemm.c), on 1 and 2 threads.
# RUNS rounds of the whole measurement; every figure is printed as the range
# over them (low-high), its share of the peak against the same round's peak.
# OPENBLAS_CORETYPE is unset, so that OpenBLAS runs the core of bertc's level.
#
#   bash bench/gemm/answer_gemm.sh          from the repository root, after a build in build/
#   RUNS=3 REPS=5 N=1024 THREADS="1 2" BUILD=build bash bench/gemm/answer_gemm.sh
set -euo pipefail
RUNS=${RUNS:-3}
REPS=${REPS:-5}
N=${N:-1024}
THREADS=${THREADS:-1 2}
BUILD=${BUILD:-build}
[ -f bench/gemm/answer_gemm.c ] || { echo "answer_gemm.sh: run from the repository root" >&2; exit 2; }
cmake --build "$BUILD" --target answer_gemm >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -fopenmp bench/gemm/int8_peak.c -o "$tmp/int8_peak"
gcc -O2 -fopenmp bench/gemm/fma_peak.c -o "$tmp/fma_peak"

echo "# Answers' linear layers against the machine's peaks"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1)" \
     "model $(sed -n 's/^model[^:]*: //p' /proc/cpuinfo | head -1)), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: \`RUNS=$RUNS REPS=$REPS N=$N THREADS=\"$THREADS\" bash bench/gemm/answer_gemm.sh\`"
"$BUILD/answer_gemm" 1 1 1 32:32 | sed -n 's/^# /- kernels: /p'

for run in $(seq "$RUNS"); do
    for th in $THREADS; do
        echo "peak int8 $th $("$tmp/int8_peak" int8 "$th" | cut -d' ' -f3) $run"
        echo "peak bf16 $th $("$tmp/int8_peak" bf16 "$th" | cut -d' ' -f3) $run"
        echo "peak fp32 $th $("$tmp/fma_peak" avx512 "$th" | cut -d' ' -f3) $run"
        env -u OPENBLAS_CORETYPE "$BUILD/answer_gemm" "$N" "$th" "$REPS" | grep -v '^#' | sed "s/\$/ $run/"
    done
done >"$tmp/raw"
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

awk -v threads="$THREADS" '
function rng(lo, hi, f) { return sprintf(f, lo) (sprintf(f, lo) == sprintf(f, hi) ? "" : "-" sprintf(f, hi)) }
function add(key, v) { if (!(key in lo) || v < lo[key]) lo[key] = v; if (!(key in hi) || v > hi[key]) hi[key] = v }
$1 == "peak" { peak[$2, $3, $5] = $4; add("peak " $2 " " $3, $4); next }
{ kind = $3 == "int8" ? "int8" : $3 == "bf16" ? "bf16" : "fp32"
  sh = $1 "x" $2; if (!(sh in seen)) { seen[sh] = 1; order[++ns] = sh }
  prod[$3] = 1; add(sh " " $3 " " $4, $6); add("pct " sh " " $3 " " $4, 100 * $6 / peak[kind, $4, $7]) }
END {
  nt = split(threads, th, " ")
  print "Peaks (G ops/s: int8 VPDPBUSD ops, bf16 VDPBF16PS and fp32 FMA flops; no memory traffic):"
  print ""
  print "| threads | int8 | bf16 | fp32 (AVX-512 FMA) |"
  print "|---|---|---|---|"
  for (t = 1; t <= nt; t++)
    printf "| %s | %s | %s | %s |\n", th[t], rng(lo["peak int8 " th[t]], hi["peak int8 " th[t]], "%.0f"),
           rng(lo["peak bf16 " th[t]], hi["peak bf16 " th[t]], "%.0f"), rng(lo["peak fp32 " th[t]], hi["peak fp32 " th[t]], "%.0f")
  print ""
  print "The products at N tokens (G ops/s, 2 N C OC ops per call, and % of the peak of their arithmetic):"
  print ""
  np = split("int8 bf16 fp32_gemm_fixed fp32_openblas fp32_onednn", pn, " ")
  hdr = "| C x OC | threads |"; sep = "|---|---|"
  for (p = 1; p <= np; p++) if (pn[p] in prod) { hdr = hdr " " pn[p] " |"; sep = sep "---|" }
  print hdr; print sep
  for (s = 1; s <= ns; s++)
    for (t = 1; t <= nt; t++) {
      line = "| " order[s] " | " th[t] " |"
      for (p = 1; p <= np; p++) {
        if (!(pn[p] in prod)) continue
        k = order[s] " " pn[p] " " th[t]
        line = line " " rng(lo[k], hi[k], "%.0f") " (" rng(lo["pct " k], hi["pct " k], "%.0f") " %) |"
      }
      print line
    }
}' "$tmp/raw"
