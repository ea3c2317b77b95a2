#!/usr/bin/env bash
# Optional packages that some tests use, installed with apt-get when missing:
#   chromium   tests/cli/report_chromium.sh renders report.html headless
#              (and tests/cli/live_chromium.sh the live page)
#   nbclient, ipykernel (PyPI)   tests/cli/notebook.sh runs examples/colab_squad.ipynb
#   curl, jq   tests/cli/serve_http.sh talks to bertc serve (serve_page.sh, serve_typing.sh: chromium too)
# Never fails: where a package cannot be installed the test that needs it
# prints "skipped" instead of failing.
set -u
here=$(dirname "$0")

# The notebook test's Python packages, from PyPI with pip (never failing the run).
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import nbclient, nbformat, ipykernel" 2>/dev/null; then
    python3 -m pip install --quiet nbclient nbformat ipykernel 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages nbclient nbformat ipykernel 2>/dev/null ||
        python3 -m pip install --quiet --user --break-system-packages nbclient nbformat ipykernel 2>/dev/null ||
        echo "ci_extras: nbclient/ipykernel could not be installed; tests/cli/notebook.sh will be skipped"
fi
if ! command -v curl >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        bash "$here/deps.sh" curl jq || echo "ci_extras: curl/jq could not be installed; tests that need them will be skipped"
    fi
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci_extras: no apt-get here; tests that need chromium will be skipped"
    exit 0
fi
bash "$here/deps.sh" chromium || echo "ci_extras: chromium could not be installed; tests that need it will be skipped"
exit 0
