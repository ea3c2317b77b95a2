#!/usr/bin/env bash
# Packed prediction on all of SQuAD v1.1 dev (10,570 questions): logits at
# real positions equal the padded path's within 1e-5, predictions identical
# to the padded path with its padding logits masked (tests/infer/test_packing_predict.c;
# make test runs its first 400 questions). A tiny random model, 2 threads:
# about 5 minutes on 2 cores.
#   scripts/packing_predict.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
exec "$build/test_packing_predict" all
