#!/usr/bin/env bash
# tests/cudaemu/serve_cli.sh RESULTS_DIR: tests/gpu/serve_cli.sh (bertc serve
# --device cuda: 64 concurrent requests against predict --device cuda) on the
# CPU stand-in, which BERTC_CUDA_MODULE names; skipped without curl and jq,
# as the other HTTP tests are.
set -u
: "${BERTC:?set BERTC}" "${BERTC_CUDA_MODULE:?set BERTC_CUDA_MODULE to libbertc_cuda_emu.so}"
for t in curl jq; do
    command -v $t >/dev/null || { echo "skipped: $t is not installed (scripts/ci_extras.sh installs it)"; exit 0; }
done
exec bash "$(dirname "$0")/../gpu/serve_cli.sh" "$BERTC" "$1"
