# What the bench scripts share; bench/lib/bert_configs.py is the same for
# their PyTorch sides. Source it, then call:
#
#   bench_isa   ISA=avx2 runs both sides at the AVX2-only level: bertc with
#               BERTC_CPU_ISA=avx2 (oneDNN capped at AVX2, OpenBLAS core
#               Haswell/Zen, gemm_fixed avx2), torch with
#               ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2 and
#               ONEDNN_MAX_CPU_ISA=AVX2. ISA=native (or unset) leaves both at
#               what the CPU can do; anything else exits 2.
#   squad_slice_setup DIR DATA CONFIG   what the CPU training benches share:
#               DIR/model, `bertc init --config CONFIG` (BERTC), and
#               DIR/train.json, SQuAD dev's first 4 articles from DATA (jq
#               slices them, so that every step is a whole batch). Exits 2
#               without jq.
bench_isa() {
    [ -n "${ISA:-}" ] || return 0
    case "$ISA" in
    avx2) export BERTC_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ;;
    native) ;;
    *) echo "$(basename "$0"): ISA must be avx2 or native, not '$ISA'" >&2; exit 2 ;;
    esac
    echo "ISA level asked for: $ISA"
}

squad_slice_setup() {
    local dir=$1 data=$2 config=$3
    command -v jq >/dev/null || { echo "jq is needed (scripts/ci_extras.sh installs it)" >&2; exit 2; }
    "$BERTC" init --config "$config" --vocab "$data/vocab/bert-base-uncased-vocab.txt" --out "$dir/model" >/dev/null
    jq '{version: .version, data: .data[0:4]}' "$data/squad-v1.1/dev-v1.1.json" >"$dir/train.json"
}
