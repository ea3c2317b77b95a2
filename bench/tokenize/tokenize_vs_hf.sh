#!/usr/bin/env bash
# Tokenizer speed: bertc tokenize against transformers' BertTokenizerFast, one thread each, on the
# SQuAD v1.1 dev contexts (bench/tokenize/tokenize_vs_hf.py says what is timed). Builds bertc if needed.
#   bash bench/tokenize/tokenize_vs_hf.sh [--repeat N] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ ! -x "$BUILD/bertc" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j "$(nproc)" --target bertc >/dev/null
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
exec python3 bench/tokenize/tokenize_vs_hf.py --bertc "$BUILD/bertc" "$@"
