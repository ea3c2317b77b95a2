#!/usr/bin/env bash
# tests/cudaemu/train_cli.sh: bertc train / predict --device cuda through the
# real module loader, on the CPU stand-in (BERTC_CUDA_MODULE names
# libbertc_cuda_emu.so; ctest sets it). tests/gpu/train_cli.sh's checks that
# need no real card, in shell and awk:
#   - `bertc devices`, the run's start-up line and info.csv name the card as
#     emulated; the monitor runs without NVML (monitor.csv has samples);
#   - 40 steps of the tiny reference model (dropout 0, no shuffle): --device
#     cpu vs --device cuda --precision fp32 on an emulated T4, every step's
#     loss within 1e-4 relative (the emulated cuBLASLt is OpenBLAS's sgemm;
#     the kernels sum in other orders than the CPU backend);
#   - bf16 (an emulated H100) and fp16 with loss scaling (T4): every loss
#     finite, the mean of the last 10 within 5 % of the CPU's; fp16 starts
#     at scale 65536. The mean, not the last step's loss alone: with 16-bit
#     activations a step's activation gradients can overflow fp16 at the
#     loss scale, and the step is skipped (as torch's GradScaler skips it);
#     one skipped update moves single-batch losses by up to 10 % in this
#     short, noisy run (lr 5e-3), the mean over 10 batches by about 1 %;
#   - a run killed (SIGKILL) after step 25 and resumed ends with the same
#     losses and byte-identical final weights as the uninterrupted one;
#   - predict --device cuda vs --device cpu on the trained model: at least
#     95 % of the answers identical;
#   - out of memory under the emulated card's cap (CUDAEMU_MEM_LIMIT=40MiB):
#     --micro-batch 64 backs off by halves to a micro-batch that fits.
set -u
: "${BERTC:?set BERTC}" "${BERTC_CUDA_MODULE:?set BERTC_CUDA_MODULE to libbertc_cuda_emu.so}"
source "$(dirname "$0")/../lib/train_cli.sh"
res() { echo "$*"; case $1 in FAIL*) fails=$((fails + 1)) ;; esac; }
col() { # metrics.csv column by name
    awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$W/$1/metrics.csv"
}

"$BERTC" devices >"$W/devices.out" 2>&1
grep -q "emulated on the CPU" "$W/devices.out" && res "PASS devices: $(grep -m1 "emulated" "$W/devices.out")" ||
    res "FAIL devices does not name the emulated card: $(cat "$W/devices.out")"

train cpu cpu fp32 || { res "FAIL the CPU run failed: $(tail -2 "$W/cpu.err")"; exit 1; }
for p in fp32 bf16 fp16; do
    card=t4
    [ $p = bf16 ] && card=h100
    if ! CUDAEMU_PROFILE=1 CUDAEMU_DEVICE=$card train "cuda-$p" cuda $p; then
        res "FAIL train $p: exit $?: $(tail -2 "$W/cuda-$p.err")"
        continue
    fi
    col cpu loss >"$W/a"
    col "cuda-$p" loss >"$W/b"
    line=$(grep -m1 -i "emulated" "$W/cuda-$p.out" "$W/cuda-$p.err" | head -1)
    [ -n "$line" ] || res "FAIL train $p: the run's output does not name the emulated card"
    if [ $p = fp32 ]; then
        w=$(paste -d, "$W/a" "$W/b" | awk -F, '{ d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; r = d / m;
            if (r > w) w = r; n++ } END { printf "%d %.3g", n, w }')
        awk -v w="${w#* }" -v n="${w% *}" 'BEGIN { exit !(n == 40 && w <= 1e-4) }' &&
            res "PASS train fp32 (emulated T4): ${w% *} losses vs CPU, worst relative difference ${w#* } (bound 1e-4)" ||
            res "FAIL train fp32 (emulated T4): ${w% *} losses vs CPU, worst relative difference ${w#* } (bound 1e-4)"
    else
        r=$(paste -d, "$W/a" "$W/b" | awk -F, '{ if ($2 != $2 + 0 || $2 == "inf" || $2 == "nan") bad++;
            n++; la[n] = $1; lb[n] = $2 }
            END { for (i = n - 9; i <= n; i++) { sa += la[i]; sb += lb[i] } d = sa - sb; if (d < 0) d = -d;
                  printf "%.4f %.4f %.3g %d", sb / 10, sa / 10, d / sa, bad + 0 }')
        set -- $r
        skips=$(col "cuda-$p" grad_norm | grep -c inf)
        extra=", $skips skipped step(s)"
        ok=$(awk -v rel="$3" -v bad="$4" 'BEGIN { print (rel <= 0.05 && bad == 0) ? 1 : 0 }')
        if [ $p = fp16 ]; then
            s0=$(col "cuda-$p" loss_scale | head -1)
            extra="$extra, first loss scale $s0"
            [ "$s0" = 65536 ] || ok=0
        fi
        [ "$ok" = 1 ] && res "PASS train $p (emulated $card): last 10 losses' mean $1 vs CPU $2 (rel $3, bound 0.05)$extra" ||
            res "FAIL train $p (emulated $card): last 10 losses' mean $1 vs CPU $2 (rel $3, bound 0.05), $4 non-finite$extra"
    fi
done
# The optimizer in one launch a step (adamw_multi): 40 of the multi-tensor AdamW and of the norm's
# first stage, no single-tensor adamw (CUDAEMU_PROFILE's table: kernel, launches, ...). In fp16 and
# bf16 the launch also writes the 16-bit weight copy: its template is the copy's type.
for p in fp32 bf16 fp16; do
    launches() { awk -v k="$1" '$1 == k { print $2 }' "$W/cuda-$p.err"; }
    k=float
    [ $p = fp16 ] && k=__half
    [ $p = bf16 ] && k=__nv_bfloat16
    mt=$(launches "fused_mt_adamw_kernel<$k>") one=$(launches adamw_kernel) ss=$(launches sum_squares_stage1)
    [ "${mt:-0}" = 40 ] && [ -z "$one" ] && [ "${ss:-0}" = 40 ] &&
        res "PASS optimizer $p: 40 steps, 40 multi-tensor AdamW launches, 40 norms, no single-tensor adamw" ||
        res "FAIL optimizer $p: multi-tensor AdamW ${mt:-0}, single-tensor adamw ${one:-0}, norms ${ss:-0} in 40 steps"
done
grep -q "emulated on the CPU" "$W/cuda-fp32/info.csv" &&
    res "PASS info.csv names the emulated card: $(grep -m1 '^backend' "$W/cuda-fp32/info.csv")" ||
    res "FAIL info.csv: $(grep -i backend "$W/cuda-fp32/info.csv")"
# The monitor without NVML (the emulated card has none): samples all the same.
n=$(awk 'NR > 1 { n++ } END { print n + 0 }' "$W/cuda-fp32/monitor.csv" 2>/dev/null)
[ "${n:-0}" -gt 0 ] && res "PASS monitor.csv without NVML: $n samples" || res "FAIL monitor.csv without NVML: no samples"

# Killed after step 25 (SIGKILL, BERTC_DEBUG_KILL) and resumed.
BERTC_DEBUG_KILL=step:25 train cuda-stop cuda fp32
echo "killed after step 25: exit $?"
train cuda-stop cuda fp32 || res "FAIL resume: $(tail -2 "$W/cuda-stop.err")"
if [ "$(col cuda-stop loss)" = "$(col cuda-fp32 loss)" ] &&
    cmp -s "$W/cuda-stop/final/model.safetensors" "$W/cuda-fp32/final/model.safetensors"; then
    res "PASS kill + resume on the emulated card: the same losses and byte-identical final weights"
else
    res "FAIL kill + resume on the emulated card: the losses or the final weights differ"
fi

# predict on the emulated card vs the CPU.
for d in cpu cuda; do
    "$BERTC" predict --model "$W/cuda-fp32/final" --data $D --out "$W/p-$d.json" --max-seq-length 64 \
        --doc-stride 16 --device $d >"$W/p-$d.log" 2>&1 || res "FAIL predict --device $d: $(tail -2 "$W/p-$d.log")"
done
split() { grep -E '^ +"' "$1" | sed 's/,$//'; }
n=$(split "$W/p-cpu.json" | wc -l)
same=$(comm -12 <(split "$W/p-cpu.json" | sort) <(split "$W/p-cuda.json" | sort) | wc -l)
awk -v s="$same" -v n="$n" 'BEGIN { exit !(n > 0 && s >= 0.95 * n) }' &&
    res "PASS predict: $same/$n answers identical, emulated CUDA vs CPU (bound 95 %)" ||
    res "FAIL predict: $same/$n answers identical, emulated CUDA vs CPU (bound 95 %)"

# Out of memory for real: a 40 MiB card (cuBLASLt's workspace takes 32), --micro-batch 64 runs out
# of device memory, backs off by halves to what fits, and trains.
CUDAEMU_MEM_LIMIT=40MiB "$BERTC" train --model $M --train $D --out "$W/oom" --max-seq-length 64 --doc-stride 16 \
    --batch 64 --micro-batch 64 --max-steps 2 --save-every 0 --save-every-minutes 0 --monitor-interval 0 \
    --device cuda --precision fp32 >"$W/oom.out" 2>"$W/oom.err"
rc=$?
plan=$(grep -m1 "micro-batch" "$W/oom.out")
echo "--micro-batch 64 on a 40 MiB emulated card: exit $rc; $(grep -c "out of memory" "$W/oom.err") out-of-memory warnings; $plan"
if [ $rc = 0 ] && grep -q "out of memory building the model for micro-batch 64" "$W/oom.err" &&
    ! grep -q "micro-batch of 64" <<<"$plan"; then
    res "PASS out of memory on a 40 MiB emulated card: backed off from micro-batch 64 and trained ($(sed 's/.*= //' <<<"$plan"))"
else
    res "FAIL out of memory on a 40 MiB emulated card: exit $rc: $(tail -2 "$W/oom.err")"
fi

[ "$fails" -eq 0 ] && echo "train_cli on cudaemu: all passed" || echo "train_cli on cudaemu: $fails failed"
[ "$fails" -eq 0 ]
