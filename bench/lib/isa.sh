# Sourced by bench/compare.sh and bench/packing.sh (from the repository root).
# ISA=avx2 runs both sides at the AVX2-only level: bertc with BERTC_CPU_ISA=avx2
# (oneDNN capped at AVX2, OpenBLAS core Haswell/Zen, gemm_fixed avx2), torch with
# ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2.
# ISA=native (or unset) leaves both at what the CPU can do.
if [ -n "${ISA:-}" ]; then
    case "$ISA" in
    avx2) export BERTC_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ;;
    native) ;;
    *) echo "$(basename "$0"): ISA must be avx2 or native, not '$ISA'" >&2; exit 2 ;;
    esac
    echo "ISA level asked for: $ISA"
fi
