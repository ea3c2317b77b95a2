#!/usr/bin/env bash
# examples/colab_squad.ipynb executed with nbclient on the CPU with tiny
# settings (BERTC_NB_TINY=1: the test model and data, 24 steps, the local
# build), so the notebook cannot rot: every cell runs, the run trains with
# the live page and a mirror, predicts and scores. Prints "skipped" where
# nbclient or ipykernel is not importable (scripts/ci_extras.sh installs
# them from PyPI).
source "$(dirname "$0")/lib/cli.sh"
if ! python3 -c "import nbclient, nbformat, ipykernel" 2>/dev/null; then
    echo "skipped: nbclient/ipykernel are not importable (scripts/ci_extras.sh pip-installs them)"
    exit 0
fi
out=$cli_tmp/executed.ipynb
cli_n=$((cli_n + 1))
BERTC_NB_TINY=1 BERTC_NB_REPO=$PWD BERTC_NB_BIN=$BERTC BERTC_NB_WORK=$cli_tmp/work BERTC_NB_MIRROR=$cli_tmp/drive \
BERTC_NB_PORT=0 timeout 600 python3 - "$out" <<'PY' >"$cli_tmp/nb.log" 2>&1
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
echo "case $cli_n: nbclient -> exit $rc"
cat "$cli_tmp/nb.log" | tail -15
[ "$rc" -eq 0 ] || cli_bad "the notebook failed: $(grep -E 'Error|error' "$cli_tmp/nb.log" | tail -3)"
grep -qE -- '--- cell [0-9]+: exact match [0-9.]+, F1 [0-9.]+' "$cli_tmp/nb.log" || cli_bad "no score from the last cell"
grep -qF "live page on port" "$out" || cli_bad "the live page cell did not run"
ls "$cli_tmp/drive/checkpoints" | grep -q step-00000024 || cli_bad "the mirror lacks the last checkpoint"
grep -qF "state done" "$out" || cli_bad "the watch cell did not show the finished run"
finish
