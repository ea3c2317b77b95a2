#!/usr/bin/env bash
# --precision bf16 on the CPU: the linear layers' products in bf16 through
# oneDNN where the CPU has AVX512-BF16 (or AMX-BF16) and libdnnl 2 loads.
#  A. Where it can (decided here from /proc/cpuinfo and ldconfig, and bertc
#     must agree): a tiny run trains (exit 0), the start-up report, info.csv
#     and the checkpoint's fingerprint say bf16; its losses follow the fp32
#     run's within 2 % but are not its bits (bf16 really ran); bench --json
#     says bf16; `bertc devices` says the CPU trains in bf16.
#  B. Everywhere: without oneDNN (BERTC_ONEDNN_LIB pointing nowhere), and
#     held to the AVX2 level, --precision bf16 --device cpu is one line,
#     exit 2, and no run directory.
source "$(dirname "$0")/lib/cli.sh"
unset BERTC_CPU_ISA
M=tests/ref/train3/init
D=tests/data/train_small.json
S=(--max-seq-length 64 --doc-stride 16 --threads 2 --monitor-interval 0 --batch 4 --max-steps 6 --device cpu)

want=no
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && [ -z "${BERTC_ONEDNN_LIB:-}" ] &&
    ldconfig -p 2>/dev/null | grep -q 'libdnnl\.so\.2 '; then
    want=yes
fi
echo "this CPU and libdnnl: bf16 training expected: $want"

if [ $want = yes ]; then
    cli_n=$((cli_n + 1))
    "$BERTC" train --model $M --train $D --out "$cli_tmp/bf" --precision bf16 "${S[@]}" >"$cli_tmp/out" 2>"$cli_tmp/err"
    rc=$?
    echo "case $cli_n: train --precision bf16 -> exit $rc; $(grep '^  backend' "$cli_tmp/out")"
    [ $rc -eq 0 ] || cli_bad "exit $rc: $(cat "$cli_tmp/err")"
    grep -q '^  backend   cpu: oneDNN + OpenMP, 2 threads, bf16 (linear layers, oneDNN 2\.[0-9.]* [a-z]' "$cli_tmp/out" ||
        cli_bad "start-up report: no bf16 backend line"
    grep -q '^backend,"cpu: oneDNN + OpenMP, 2 threads, bf16 (linear layers' "$cli_tmp/bf/info.csv" ||
        cli_bad "info.csv: $(grep '^backend' "$cli_tmp/bf/info.csv")"
    st=$(ls -d "$cli_tmp"/bf/checkpoints/step-*/state.json | tail -1)
    grep -q '"--precision": "bf16"' "$st" || cli_bad "fingerprint: $(grep -e '--precision' "$st")"
    "$BERTC" train --model $M --train $D --out "$cli_tmp/fp" --precision fp32 "${S[@]}" >/dev/null 2>"$cli_tmp/err"
    [ $? -eq 0 ] || cli_bad "the fp32 run failed: $(cat "$cli_tmp/err")"
    cli_n=$((cli_n + 1))
    out=$(awk -F, 'FNR == 1 { next } NR == FNR { l[$1] = $3; next }
        { d = $3 - l[$1]; if (d < 0) d = -d; r = d / (l[$1] < 0 ? -l[$1] : l[$1]); if (r > m) m = r; if (d > 0) diff++; n++ }
        END { printf "%d steps, max relative difference %.2e, %d differ", n, m, diff }' \
        "$cli_tmp/fp/metrics.csv" "$cli_tmp/bf/metrics.csv")
    echo "case $cli_n: bf16 losses against fp32: $out"
    echo "$out" | awk '{ exit !($1 == 6 && $6 + 0 < 0.02 && $7 > 0) }' || cli_bad "bf16 losses: $out"
    cli_n=$((cli_n + 1))
    "$BERTC" bench --config tiny --seq 32 --batch 2 --steps 1 --warmup-steps 0 --threads 2 --precision bf16 --json \
        >"$cli_tmp/b.json" 2>"$cli_tmp/err"
    echo "case $cli_n: bench --precision bf16: exit $?, $(grep -o '"precision": "[^"]*"' "$cli_tmp/b.json")"
    grep -q '"backend": "cpu", "precision": "bf16"' "$cli_tmp/b.json" || cli_bad "bench --json does not say bf16"
    cli_n=$((cli_n + 1))
    "$BERTC" devices >"$cli_tmp/out" 2>&1
    grep -qF "(this CPU also trains with --precision bf16)" "$cli_tmp/out" || cli_bad "devices does not offer bf16"
else
    cli_n=$((cli_n + 1))
    "$BERTC" devices >"$cli_tmp/out" 2>&1
    grep -qF "trains with --precision bf16" "$cli_tmp/out" && cli_bad "devices offers bf16 on a CPU without it"
    expect 2 "--precision bf16 on the CPU " -- train --model $M --train $D --out "$cli_tmp/bf" --precision bf16 "${S[@]}"
    cli_absent "$cli_tmp/bf"
fi

export BERTC_ONEDNN_LIB=/nonexistent/libdnnl.so.2
expect 2 "--precision bf16 on the CPU " -- train --model $M --train $D --out "$cli_tmp/bf2" --precision bf16 "${S[@]}"
cli_absent "$cli_tmp/bf2"
[ $want = yes ] && ! grep -qF "computes with oneDNN: cannot load /nonexistent/libdnnl.so.2 (" "$cli_tmp/err" &&
    cli_bad "the error does not name the library"
unset BERTC_ONEDNN_LIB
if grep -qw avx2 /proc/cpuinfo; then
    export BERTC_CPU_ISA=avx2
    expect 2 "--precision bf16 on the CPU needs " -- bench --config tiny --seq 32 --batch 2 --precision bf16
    unset BERTC_CPU_ISA
fi
finish
