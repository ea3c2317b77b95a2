"""DESIGN.md's named BERT configs and bertc's FLOPs, for the PyTorch sides of the benchmarks.

Both are asked of bertc (`bertc plan --config NAME --seq T --json`), so that the shapes and the FLOPs
formula have one home (src/model/config.c) and the two sides of a comparison count alike. The binary
is $BERTC, else build/bertc (or build-gpu/bertc, tests/gpu/run.sh's) of this checkout.
"""

import collections.abc
import functools
import json
import os
import subprocess

# The names `bertc init|plan|bench --config NAME` takes.
NAMES = ("tiny", "mini", "small", "minilm", "base", "large")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def bertc_path():
    if os.environ.get("BERTC"):
        return os.environ["BERTC"]
    found = [p for p in (os.path.join(ROOT, d, "bertc") for d in ("build", "build-gpu")) if os.access(p, os.X_OK)]
    return found[0] if found else os.path.join(ROOT, "build", "bertc")


@functools.lru_cache(maxsize=None)
def plan(name, seq, batch=1):
    """`bertc plan --json` for a named config: the model's shape, bytes, FLOPs per window and the
    memory per micro-batch (fp32, on a nominal card: the shape and the FLOPs depend on neither)."""
    cmd = [bertc_path(), "plan", "--config", name, "--seq", str(seq), "--batch", str(batch), "--json",
           "--precision", "fp32", "--gpu-mem", "80GiB"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise SystemExit(f"bert_configs.py: {cmd[0]} not found; build bertc first or set BERTC") from None
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"bert_configs.py: {' '.join(cmd)}: exit {e.returncode}: {e.stderr.strip()}") from None
    return json.loads(out)


def config(name):
    """(layers, hidden, heads, intermediate) of a named config."""
    p = plan(name, 1)
    return p["layers"], p["hidden"], p["heads"], p["intermediate"]


class _Configs(collections.abc.Mapping):
    """NAME -> (layers, hidden, heads, intermediate), asked of bertc when first looked up."""

    def __getitem__(self, name):
        if name not in NAMES:
            raise KeyError(name)
        return config(name)

    def __iter__(self):
        return iter(NAMES)

    def __len__(self):
        return len(NAMES)


CONFIGS = _Configs()


def step_flops(name, batch, seq):
    """FLOPs of a training step of `batch` windows of `seq` tokens as bertc counts them (bert_flops,
    src/model/config.h: 6*(L*(4C^2+2CI)+2C)*T + 12*L*T^2*C per window), an exact integer."""
    return batch * plan(name, seq)["flops_per_example_step"]
