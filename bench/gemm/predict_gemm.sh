#!/usr/bin/env bash
# What batch-invariant prediction costs: `bertc predict` with its fixed-order
# GEMM (the default) against the same binary with OpenBLAS's GEMM
# (BERTC_INFER_GEMM=openblas), alternated, padded and packed, on the first
# ARTICLES articles of SQuAD dev with a random model of CONFIG.
#
#   bash bench/gemm/predict_gemm.sh                  # minilm, 3 articles, 2 threads, 3 rounds
#   CONFIG=base ARTICLES=1 ROUNDS=2 bash bench/gemm/predict_gemm.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BERTC=${BERTC:-build/bertc}
CONFIG=${CONFIG:-minilm}
ARTICLES=${ARTICLES:-3}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
DEV=${DEV:-../shared/data/squad-v1.1/dev-v1.1.json}
VOCAB=${VOCAB:-../shared/data/vocab/bert-base-uncased-vocab.txt}
[ -x "$BERTC" ] || { echo "predict_gemm.sh: $BERTC not found; build first or set BERTC" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['data']=d['data'][:int(sys.argv[2])]; json.dump(d, open(sys.argv[3], 'w'))" \
    "$DEV" "$ARTICLES" "$out/dev.json"
"$BERTC" init --config "$CONFIG" --vocab "$VOCAB" --out "$out/model" >/dev/null
echo "machine: $(lscpu | grep 'Model name' | sed 's/.*: *//'), $(nproc) cores; date $(date -u +%FT%TZ)"
echo "kernels: $("$BERTC" version | sed -n 's/^kernels: //p')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bertc predict --model (random $CONFIG) --data (SQuAD dev, $ARTICLES articles) --threads $THREADS --packing none|varlen"
for r in $(seq "$ROUNDS"); do
    for p in none varlen; do
        for g in fixed openblas; do
            env=()
            [ $g = openblas ] && env=(BERTC_INFER_GEMM=openblas)
            s=$( { env "${env[@]}" /usr/bin/time -f "%e %U" "$BERTC" predict --model "$out/model" --data "$out/dev.json" \
                --out "$out/p-$p-$g.json" --threads "$THREADS" --packing $p >/dev/null 2>"$out/err"; } 2>&1; tail -1 "$out/err")
            echo "$r $p $g $s" >>"$out/times"
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/times" <<'PY'
import sys, statistics as st
t = {}
for line in open(sys.argv[1]):
    r, p, g, wall, user = line.split()[:5]
    t.setdefault((p, g), []).append((float(wall), float(user)))
print(f"{'packing':<8}{'gemm':<10}{'wall s (median)':>16}{'CPU s (median)':>16}")
for p in ("none", "varlen"):
    for g in ("fixed", "openblas"):
        w = st.median(x[0] for x in t[(p, g)]); u = st.median(x[1] for x in t[(p, g)])
        print(f"{p:<8}{g:<10}{w:>16.2f}{u:>16.2f}")
    f = st.median(x[1] for x in t[(p, "fixed")]); o = st.median(x[1] for x in t[(p, "openblas")])
    print(f"{p:<8}fixed / openblas CPU time: {f / o:.3f}")
PY
