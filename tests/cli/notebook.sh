#!/usr/bin/env bash
# examples/colab_squad.ipynb executed with nbclient on the CPU with tiny
# settings (BERTC_NB_TINY=1: the test model and data, 24 steps, the local
# build), so the notebook cannot rot: every cell runs, the run trains with
# the live page and a mirror, predicts and scores. Prints "skipped" where
# nbclient or ipykernel is not importable (scripts/ci_extras.sh installs
# them from PyPI). Run twice: as it is, and with BERTC_API_KEY set (the
# live page behind a key, read with it by the live page cell).
source "$(dirname "$0")/lib/cli.sh"
if ! python3 -c "import nbclient, nbformat, ipykernel" 2>/dev/null; then
    echo "skipped: nbclient/ipykernel are not importable (scripts/ci_extras.sh pip-installs them)"
    exit 0
fi
# run NAME [ENV=VALUE...]: the notebook executed into $cli_tmp/NAME.ipynb, its log in $cli_tmp/NAME.log
run() {
    local name=$1
    shift
    out=$cli_tmp/$name.ipynb
    cli_n=$((cli_n + 1))
    env "$@" BERTC_NB_TINY=1 BERTC_NB_REPO=$PWD BERTC_NB_BIN=$BERTC BERTC_NB_WORK=$cli_tmp/$name/work \
        BERTC_NB_MIRROR=$cli_tmp/$name/drive BERTC_NB_PORT=0 timeout 600 python3 - "$out" <<'PY' >"$cli_tmp/$name.log" 2>&1
import sys, nbformat, nbclient
nb = nbformat.read("examples/colab_squad.ipynb", as_version=4)
client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}})
try:
    client.execute()
finally:
    nbformat.write(nb, sys.argv[1])
for i, c in enumerate(nb.cells):
    if c.cell_type != "code":
        continue
    text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
    print("--- cell %d: %s" % (i, text.strip().splitlines()[-1] if text.strip() else "(no output)"))
PY
    rc=$?
    echo "case $cli_n: nbclient ($name) -> exit $rc"
    tail -15 "$cli_tmp/$name.log"
    [ "$rc" -eq 0 ] || cli_bad "the notebook failed: $(grep -E 'Error|error' "$cli_tmp/$name.log" | tail -3)"
    grep -qE -- '--- cell [0-9]+: exact match [0-9.]+, F1 [0-9.]+' "$cli_tmp/$name.log" || cli_bad "no score from the last cell"
    grep -qF "live page on port" "$out" || cli_bad "the live page cell did not run"
    ls "$cli_tmp/$name/drive/checkpoints" | grep -q step-00000024 || cli_bad "the mirror lacks the last checkpoint"
    grep -qF "state done" "$out" || cli_bad "the watch cell did not show the finished run"
}
run plain
# With BERTC_API_KEY the trainer puts its live page behind the key, and the live page cell reads it
# with the key (the status text, not a 401).
run keyed BERTC_API_KEY=nb-key-0123456789
live=$(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    if "The live page" in "".join(c["source"]):
        print("".join("".join(o.get("text", "")) for o in c.get("outputs", [])))' "$cli_tmp/keyed.ipynb")
cli_n=$((cli_n + 1))
echo "case $cli_n: the live page cell with BERTC_API_KEY: $(echo "$live" | head -2 | tr '\n' '|')"
echo "$live" | grep -qF "(behind the API key)" || cli_bad "the live page cell did not see the key"
echo "$live" | grep -qE '^state (starting|training|evaluating|done)' || cli_bad "the live page cell did not read the status with the key"
finish
