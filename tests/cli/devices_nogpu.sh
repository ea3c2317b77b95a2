# bertc devices where no NVIDIA driver exists: says so, describes the CPU and
# what bertc will use and the planner's prediction for a 16 GiB card, exits 0.
source "$(dirname "$0")/lib/cli.sh"
export BERTC_NVML_LIB=/nonexistent/libnvidia-ml.so.1

expect_help devices "usage: bertc devices"
expect 2 "unexpected argument 'extra'" -- devices extra
expect 2 "unknown option '--gpu'" -- devices --gpu 0

cli_n=$((cli_n + 1))
"$BERTC" devices >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: bertc devices (no driver) -> exit $rc"
cat "$cli_tmp/out"
[ "$rc" -eq 0 ] || cli_bad "exit $rc, want 0"
[ -s "$cli_tmp/err" ] && cli_bad "stderr not empty: $(cat "$cli_tmp/err")"
for want in "GPU: none found" "cannot load /nonexistent/libnvidia-ml.so.1" "CPU: " "cores:" "AVX-512: " \
            "AVX512-BF16: " "memory:" "bertc will use: the CPU backend" "thread(s)" "precision fp32" \
            "planner: BERT-base at sequence length 384, fp16, on 16.00 GiB (a 16 GiB card such as a T4; no GPU here): largest micro-batch"; do
    grep -qF -- "$want" "$cli_tmp/out" || cli_bad "stdout lacks '$want'"
done
# the thread count bertc reports follows OMP_NUM_THREADS
OMP_NUM_THREADS=3 "$BERTC" devices | grep -qE "CPU backend \((oneDNN|OpenBLAS) \+ OpenMP\), 3 thread\(s\)" ||
    cli_bad "OMP_NUM_THREADS=3 not reflected"
# the AVX2 line agrees with the kernel's flags
if grep -qw avx2 /proc/cpuinfo; then
    grep -q "vector units: .*AVX2" "$cli_tmp/out" || cli_bad "AVX2 in /proc/cpuinfo but not reported"
fi
# devices and version read the CPU alike (cpu_isa): version's level is what devices' vector units say
level=$("$BERTC" version | sed -nE 's/^cpu: .* level ([a-z0-9]+) .*/\1/p')
cli_n=$((cli_n + 1))
echo "case $cli_n: version's level '$level' against devices' $(grep -E "vector units|AVX-512:" "$cli_tmp/out" | tr -s ' ' | tr '\n' ';')"
case "$level" in
avx512) grep -q "AVX-512: yes" "$cli_tmp/out" || cli_bad "version says avx512, devices no AVX-512" ;;
avx2) grep -q "vector units: .*AVX2 FMA" "$cli_tmp/out" || cli_bad "version says avx2, devices lacks AVX2 or FMA" ;;
sse|avx) grep -q "AVX-512: no" "$cli_tmp/out" && ! grep -q "vector units: .*AVX2" "$cli_tmp/out" ||
          cli_bad "version says $level, devices has AVX2 or AVX-512" ;;
*) cli_bad "no level in bertc version" ;;
esac
finish
