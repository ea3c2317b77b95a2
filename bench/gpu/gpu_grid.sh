#!/usr/bin/env bash
# bench/gpu/gpu_grid.sh BERTC [OUTDIR]: the table a user compares cards with,
# from `bertc bench`: BERT-base training steps (random data, dropout on,
# AdamW) at sequence lengths 128, 384 and 512 in each precision, with
# examples/s, the peak memory, and the largest batch that trains under LIMIT
# (16GiB: a T4's card) or, with DEVICE=cpu, the CPU's row (fp32; the largest
# batch is then the planner's, for the host's available memory, in brackets).
# Writes OUTDIR/grid.jsonl (one `bertc bench --json` line per run) and
# OUTDIR/grid.md (the table, the date, the device and the commands).
# Environment: DEVICE (cuda) CONFIG (base) SEQS ("128 384 512")
# PRECISIONS (cuda: "bf16 fp16 tf32 fp32"; cpu: fp32) LIMIT (16GiB)
# STEPS (5) MAXBATCH_PRECISIONS (cuda: "fp16 bf16"; the --max-batch runs).
set -u -o pipefail
BERTC=${1:?usage: bench/gpu/gpu_grid.sh BERTC [OUTDIR]}
OUT=${2:-bench/grid-$(date +%Y%m%d-%H%M%S)}
DEVICE=${DEVICE:-cuda}
CONFIG=${CONFIG:-base}
SEQS=${SEQS:-384 512 128}
LIMIT=${LIMIT:-16GiB}
STEPS=${STEPS:-5}
if [ "$DEVICE" = cpu ]; then
    PRECISIONS=${PRECISIONS:-fp32}
    MAXBATCH_PRECISIONS=
else
    PRECISIONS=${PRECISIONS:-bf16 fp16 tf32 fp32}
    MAXBATCH_PRECISIONS=${MAXBATCH_PRECISIONS:-fp16 bf16}
fi
mkdir -p "$OUT" || exit 1
jsonl=$OUT/grid.jsonl
: >"$jsonl"
batch_for() { case $1 in 128) echo 64 ;; 384) echo 32 ;; *) echo 24 ;; esac; }
[ "$DEVICE" = cpu ] && batch_for() { echo 8; }
one() { # label, then bertc bench options
    local label=$1 line
    shift
    echo "== $label: $BERTC bench $*"
    line=$("$BERTC" bench --json "$@" 2>"$OUT/last.err" | grep '^{' | tail -n1)
    if [ -z "$line" ]; then
        echo "   failed: $(tail -n2 "$OUT/last.err")"
        line="{\"label\": \"$label\", \"error\": \"$(tail -n1 "$OUT/last.err" | tr -d '"\\')\"}"
    else
        line="{\"label\": \"$label\", ${line#\{}"
    fi
    echo "$line" >>"$jsonl"
    echo "   $line"
}
for seq in $SEQS; do
    for p in $PRECISIONS; do
        one "$p $seq" --device "$DEVICE" --config "$CONFIG" --seq "$seq" --batch "$(batch_for "$seq")" \
            --precision "$p" --steps "$STEPS" --warmup-steps 2
    done
    if [ "$DEVICE" = cpu ]; then # the planner's answer for the host's available memory
        avail=$(awk '/^MemAvailable:/ {print $2 * 1024}' /proc/meminfo)
        big=$("$BERTC" plan --config "$CONFIG" --seq "$seq" --precision fp32 --gpu-mem "$avail" 2>/dev/null |
            sed -n 's/^largest micro-batch for .*: \([0-9]*\) .*/\1/p')
        echo "{\"label\": \"cpu $seq plan\", \"seq\": $seq, \"planned_batch\": ${big:-0}, \"avail_bytes\": $avail}" >>"$jsonl"
    fi
    for p in $MAXBATCH_PRECISIONS; do
        one "$p $seq max" --device "$DEVICE" --config "$CONFIG" --seq "$seq" --batch "$(batch_for "$seq")" \
            --precision "$p" --steps "$STEPS" --warmup-steps 1 --gpu-mem-limit "$LIMIT" --max-batch
    done
done
python3 - "$jsonl" "$OUT/grid.md" "$BERTC" "$DEVICE" "$CONFIG" "$LIMIT" <<'PY'
import datetime, json, sys
jsonl, out, bertc, device, config, limit = sys.argv[1:7]
rows = [json.loads(l) for l in open(jsonl) if l.strip()]
plans = {r["seq"]: r for r in rows if r.get("label", "").endswith(" plan")}
rows = [r for r in rows if not r.get("label", "").endswith(" plan")]
dev = next((r["device"] for r in rows if "device" in r), device)
cmd = f"DEVICE={device} CONFIG={config} LIMIT={limit} bash bench/gpu/gpu_grid.sh {bertc}"
L = [f"### `bertc bench`, {config}, {dev} ({datetime.date.today().isoformat()})", "", f"Command: `{cmd}`", "",
     "| precision | seq | batch | examples/s | ms/step | GFLOP/s | peak memory | " +
     ("largest batch (planner, host memory) |" if device == "cpu" else f"largest batch under {limit} (planner) |"),
     "|---|---|---|---|---|---|---|---|"]
for r in rows:
    if "error" in r:
        L.append(f"| {r['label']} | | | | | | | failed: {r['error']} |")
        continue
    big = f"{r['largest_batch']} ({r['planned_batch']})" if "largest_batch" in r else ""
    if r["seq"] in plans and r.get("backend") == "cpu":
        pl = plans[r["seq"]]
        big = f"{pl['planned_batch']} ({pl['avail_bytes'] / 2**30:.1f} GiB available)"
    L.append(f"| {r['precision']} | {r['seq']} | {r['batch']} | {r['examples_per_s']:.1f} | {r['ms_per_step']:.1f} | "
             f"{r['gflops']:.0f} | {r['peak_bytes'] / 2**30:.2f} GiB | {big} |")
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
