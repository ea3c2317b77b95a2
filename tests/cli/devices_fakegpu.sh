# bertc devices with the fake NVML of tests/fakenvml: the GPU is listed with
# its memory, compute capability, Tensor Core / bf16 support, driver and CUDA
# versions, current use and precision; a driver failing queries, a driver not
# loaded and a lost GPU are described, never fatal (exit 0).
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/../fakenvml/path.sh"
lib=$(fake_nvml_path "$cli_tmp") || { echo "FAIL: no fake NVML library"; exit 1; }
echo "fake NVML: $lib"
export BERTC_NVML_LIB="$lib"

run_devices() { # NAME, then env assignments; output in $cli_tmp/out
    local name=$1
    shift
    cli_n=$((cli_n + 1))
    env "$@" "$BERTC" devices >"$cli_tmp/out" 2>"$cli_tmp/err"
    local rc=$?
    echo "case $cli_n: $name: bertc devices -> exit $rc"
    sed 's/^/    /' "$cli_tmp/out"
    [ "$rc" -eq 0 ] || cli_bad "$name: exit $rc, want 0"
}
has() { grep -qF -- "$1" "$cli_tmp/out" || cli_bad "stdout lacks '$1'"; }

run_devices "T4-like"
has "NVIDIA driver 535.104.05, CUDA 12.2 supported by the driver; 1 GPU(s)"
has "GPU 0: Fake Tesla T4"
has "memory:             15.0 GiB"
has "compute capability: 7.5 (Tensor Cores: yes, bf16: no)"
has "precision (auto):   fp16"
has "busy"
has "/70 W"
# 102 since fp16 keeps 16-bit activations, which the GEMMs read as they are, and the GEMMs' 16-bit
# weight copy (issue 47; 100 with 16-bit copies of the GEMMs' inputs in the workspace, 52 with fp32
# activations, 39 with T x T fp32 attention probabilities)
has "planner: BERT-base at sequence length 384, fp16, on 15.00 GiB: largest micro-batch 102"
has "CPU: "
has "bertc will use: "

run_devices "two H100-like" FAKENVML_DEVICES=2 FAKENVML_CC=9.0 FAKENVML_NAME="Fake H100 80GB HBM3" FAKENVML_MEM_GIB=79.6
has "2 GPU(s)"
has "GPU 1: Fake H100 80GB HBM3"
has "compute capability: 9.0 (Tensor Cores: yes, bf16: yes)"
has "precision (auto):   bf16"
has "memory:             79.6 GiB"

run_devices "old GPU" FAKENVML_CC=6.1
has "Tensor Cores: no, bf16: no"
has "need compute capability 7.5 or newer"

run_devices "failing queries" FAKENVML_FAIL=temperature,power=3,throttle=15
has "NVML errors:        3 queries failed (first: temperature: Unknown Error (NVML error 999))"
grep -q "now: .*°C" "$cli_tmp/out" && cli_bad "a failed temperature was printed"

run_devices "lost GPU" FAKENVML_FAIL=handle=15
has "GPU 0: cannot be queried"
has "GPU is lost"

run_devices "no name, no compute capability" FAKENVML_FAIL=name,cc
has "GPU 0: (name unknown)"
has "compute capability: unknown"

run_devices "driver not loaded" FAKENVML_INIT=9
has "GPU: none found"
has "Driver Not Loaded"
has "bertc will use: the CPU backend"

run_devices "no GPU" FAKENVML_DEVICES=0
has "GPU: none found (NVML reports no GPU)"
finish
