#!/usr/bin/env bash
# ctest entry for the libFuzzer harnesses (tests/fuzz/README.md): builds them
# with clang under $BERTC_BUILD/fuzz, replays every regression input and
# seed, then fuzzes each target for a short bounded time (BERTC_FUZZ_SECONDS,
# default 15 s). Any crash, leak, sanitizer report or broken invariant fails.
# The sanitizer build skips it: the harnesses are sanitized already, and
# libFuzzer cannot link into that build's gcc-compiled library.
source "$(dirname "$0")/lib/cli.sh"
if [ -n "${BERTC_SANITIZED:-}" ]; then
    echo "skipped: BERTC_SANITIZED"
    exit 0
fi
: "${BERTC_BUILD:?set BERTC_BUILD to the build dir}"
export BERTC_DATA
seconds="${BERTC_FUZZ_SECONDS:-15}"
start=$(date +%s)
bash scripts/fuzz.sh --seconds "$seconds" --build "$BERTC_BUILD/fuzz"
rc=$?
echo "fuzz_smoke: exit $rc after $(($(date +%s) - start)) s"
[ "$rc" -eq 0 ] || cli_bad "scripts/fuzz.sh exit $rc"
finish
