#!/usr/bin/env bash
# Packed (unpadded) training and prediction against padded, in one run, on
# the real length distribution: the 10,784 windows of SQuAD v1.1 dev at
# max_seq_length 384 / doc_stride 128 with the bert-base-uncased vocab
# (bench/squad_dev_lengths.txt: mean 176 tokens, median 164; 54 % of a
# padded batch is padding).
#
# Training: `bertc bench` steps (forward with dropout, backward, AdamW) of
# --batch windows drawn from the lengths, padded to 384 (--packing none) and
# packed (--packing varlen), and transformers' BertForQuestionAnswering with
# SDPA attention (bench/train_speed/torch_step.py; its cost does not depend on the
# lengths, as run_qa.py pads every window to 384), per config.
# Prediction: `bertc predict` over all of SQuAD dev, padded and packed, with
# a random model of PREDICT_CONFIG (bertc init), and whether predictions.json
# is the same.
#
#   bash bench/train_speed/packed_vs_padded.sh                    # minilm and base, batch 8, 2 threads
#   CONFIGS="minilm" STEPS=3 PREDICT_CONFIG=tiny bash bench/train_speed/packed_vs_padded.sh
#   PREDICT=0 CONFIGS=minilm bash bench/train_speed/packed_vs_padded.sh   # training only
#   ISA=avx2 PREDICT=0 bash bench/train_speed/packed_vs_padded.sh         # both sides at the AVX2-only level
#   PRECISION=bf16 PREDICT=0 bash bench/train_speed/packed_vs_padded.sh   # bertc training in bf16 (AVX512-BF16
#                                                                         # CPUs); torch in fp32 and under bf16 autocast
set -euo pipefail
cd "$(dirname "$0")/../.."

BERTC=${BERTC:-build/bertc}
STEPS=${STEPS:-5}
WARMUP=${WARMUP:-1}
BATCH=${BATCH:-8}
THREADS=${THREADS:-2}
CONFIGS=${CONFIGS:-minilm base}
PRECISION=${PRECISION:-fp32}
PREDICT_CONFIG=${PREDICT_CONFIG:-minilm}
LENGTHS=bench/squad_dev_lengths.txt
DEV=${DEV:-../shared/data/squad-v1.1/dev-v1.1.json}
VOCAB=${VOCAB:-../shared/data/vocab/bert-base-uncased-vocab.txt}
[ -x "$BERTC" ] || { echo "packed_vs_padded.sh: $BERTC not found; build first or set BERTC" >&2; exit 2; }

source bench/lib/bench.sh && bench_isa # ISA=avx2|native
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(lscpu | grep 'Model name' | sed 's/.*: *//'), $(nproc) cores visible; date $(date -u +%FT%TZ)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cfg in $CONFIGS; do
    for p in none varlen; do
        echo "bertc bench --config $cfg --seq 384 --batch $BATCH --threads $THREADS --lengths $LENGTHS --packing $p --precision $PRECISION"
        env -u OPENBLAS_CORETYPE "$BERTC" bench --config "$cfg" --seq 384 --batch "$BATCH" --threads "$THREADS" \
            --steps "$STEPS" --warmup-steps "$WARMUP" --lengths "$LENGTHS" --packing $p --precision "$PRECISION" \
            --json >"$out/$cfg-$p.json"
        cat "$out/$cfg-$p.json"
    done
    echo "python3 bench/train_speed/torch_step.py --config $cfg --seq 384 --batch $BATCH --threads $THREADS --attn sdpa"
    python3 bench/train_speed/torch_step.py --config "$cfg" --seq 384 --batch "$BATCH" --threads "$THREADS" --steps "$STEPS" \
        --warmup-steps "$WARMUP" --attn sdpa >"$out/$cfg-torch.json"
    cat "$out/$cfg-torch.json"
    if [ "$PRECISION" = bf16 ]; then
        echo "python3 bench/train_speed/torch_step.py --config $cfg --seq 384 --batch $BATCH --threads $THREADS --attn sdpa --autocast bf16"
        python3 bench/train_speed/torch_step.py --config "$cfg" --seq 384 --batch "$BATCH" --threads "$THREADS" --steps "$STEPS" \
            --warmup-steps "$WARMUP" --attn sdpa --autocast bf16 >"$out/$cfg-torchbf16.json"
        cat "$out/$cfg-torchbf16.json"
    fi
done
echo "load after training: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" $CONFIGS <<'PY'
import json, os, sys
d = sys.argv[1]
print(f"\n{'config':<8}{'impl':<22}{'ms/step':>10}{'examples/s':>12}{'CPU ms/step':>13}")
for cfg in sys.argv[2:]:
    kinds = ("none", "varlen", "torch") + (("torchbf16",) if os.path.exists(f"{d}/{cfg}-torchbf16.json") else ())
    r = {k: json.loads(open(f"{d}/{cfg}-{k}.json").read().strip().splitlines()[-1]) for k in kinds}
    prec = r["none"].get("precision", "fp32")
    names = {"none": f"bertc padded {prec}", "varlen": f"bertc packed {prec}", "torch": "torch sdpa fp32",
             "torchbf16": "torch sdpa bf16 autocast"}
    for k, name in ((k, names[k]) for k in kinds):
        x = r[k]
        print(f"{cfg:<8}{name:<22}{x['ms_per_step']:>10.1f}{x['examples_per_s']:>12.3f}{x.get('cpu_ms_per_step', float('nan')):>13.1f}")
    print(f"{cfg:<8}kernels: bertc {r['none'].get('kernels', r['none'].get('openblas_core'))}; torch {r['torch'].get('cpu_capability', '?')}, {r['torch'].get('blas', '?')}")
    print(f"{cfg:<8}packed / padded {r['varlen']['examples_per_s'] / r['none']['examples_per_s']:.2f}x, "
          f"packed / torch sdpa {r['varlen']['examples_per_s'] / r['torch']['examples_per_s']:.2f}x examples/s "
          f"(CPU time: packed / padded {r['none']['cpu_ms_per_step'] / r['varlen']['cpu_ms_per_step']:.2f}x)")
    if "torchbf16" in r:
        print(f"{cfg:<8}packed / torch sdpa bf16 autocast {r['varlen']['examples_per_s'] / r['torchbf16']['examples_per_s']:.2f}x examples/s")
PY

if [ "${PREDICT:-1}" = 0 ]; then echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; exit 0; fi
echo
echo "prediction: all of SQuAD dev, a random $PREDICT_CONFIG model, $THREADS threads"
"$BERTC" init --config "$PREDICT_CONFIG" --vocab "$VOCAB" --out "$out/model" >/dev/null
for p in none varlen; do
    /usr/bin/time -f "%e s wall, %U s user" "$BERTC" predict --model "$out/model" --data "$DEV" \
        --out "$out/pred-$p.json" --threads "$THREADS" --packing $p 2>&1 | tail -n 2
done
if cmp -s "$out/pred-none.json" "$out/pred-varlen.json"; then echo "predictions.json: identical"
else
    echo "predictions.json: $(python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); print(sum(a[k]!=b[k] for k in a), 'of', len(a), 'answers differ')" "$out/pred-none.json" "$out/pred-varlen.json")"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
