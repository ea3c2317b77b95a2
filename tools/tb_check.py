#!/usr/bin/env python3
"""Reads a bertc run's TensorBoard event files with the `tensorboard` package
(pip install tensorboard) and checks them against the run's CSV files.

    python3 tools/tb_check.py RUN        check RUN/tb/ against RUN/*.csv
    python3 tools/tb_check.py --serve RUN  also start a TensorBoard server on
                                         RUN/tb and compare what its HTTP API
                                         serves (the UI's data) with the files
    python3 tools/tb_check.py --golden   print the reference encodings that
                                         tests/obs/test_tb.c compares with

What is checked:
  * every event file opens, its records pass TensorBoard's CRC checks, and
    its first event is file_version "brain.Event:2";
  * train/loss, train/lr, train/grad_norm, train/loss_scale,
    train/examples_per_s hold, step for step, the values of metrics.csv (as
    float32), after TensorBoard has dropped the points a resumed run
    replaced (SessionLog START, purge_orphaned_data);
  * eval/exact_match and eval/f1 match eval.csv (or metrics.csv's columns);
  * the monitor series (gpu/*, cpu/*) are there when monitor.csv has the
    column, and every value is one of monitor.csv's (to its rounding);
  * with --serve: a real `tensorboard` server (its fast Rust data server by
    default) serves every scalar tag with the same steps and values.

A run made without a trainer:  BERTC_KEEP_RUN=/tmp/obsrun build/test_monitor
then  python3 tools/tb_check.py /tmp/obsrun
Exit status 0 when everything matches, 1 otherwise.
"""
import csv
import glob
import math
import os
import struct
import sys


def golden():
    import io
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    def c(b):
        return '"' + "".join("\\x%02x" % x for x in b) + '"'

    ev = [
        ("version", Event(wall_time=1700000000.5, file_version="brain.Event:2")),
        ("scalar", Event(wall_time=1700000000.5, step=42,
                         summary=Summary(value=[Summary.Value(tag="train/loss", simple_value=1.25)]))),
        ("session", Event(wall_time=1700000001.25, step=300, session_log=SessionLog(status=SessionLog.START))),
        ("negative", Event(wall_time=1.0, step=-3, summary=Summary(value=[Summary.Value(tag="x", simple_value=-0.0)]))),
    ]
    for name, e in ev:
        print("gold_%s = %s" % (name, c(e.SerializeToString())))
    buf = io.BytesIO()
    RecordWriter(buf).write(ev[1][1].SerializeToString())
    print("gold_record = %s" % c(buf.getvalue()))


def read_csv(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return None
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:] if len(r) == len(head)]


def num(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None


def text_tol(s):
    """Half a unit in the last digit the CSV printed: the most its rounding can move a value."""
    s = s.strip().lower()
    mant, _, exp = s.partition("e")
    dec = len(mant.split(".")[1]) if "." in mant else 0
    return 0.5 * 10.0 ** (int(exp or 0) - dec)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


class Checker:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failures += 1


def serve_check(c, tbdir, acc, tags):
    import json
    import socket
    import subprocess
    import time
    import urllib.parse
    import urllib.request

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", tbdir, "--port", str(port),
                             "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port

    def get(path):
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return json.loads(r.read().decode())

    try:
        served = None
        for _ in range(120):
            try:
                served = get("/data/plugin/scalars/tags")
                if served.get(".") and set(served["."]) >= tags:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        got_tags = set((served or {}).get(".", {}))
        c.check(got_tags == tags, "tensorboard server on port %d serves %d scalar tags (files: %d)" % (
            port, len(got_tags), len(tags)))
        for tag in sorted(tags & got_tags):
            q = urllib.parse.urlencode({"run": ".", "tag": tag})
            pts = {int(step): v for _, step, v in get("/data/plugin/scalars/scalars?" + q)}
            want = {e.step: e.value for e in acc.Scalars(tag)}
            # the server down-samples long series; every point it serves must be one of the file's
            bad = [s for s in pts if s not in want or abs(pts[s] - want[s]) > 1e-6 * max(1.0, abs(want[s]))]
            c.check(pts and not bad and (len(pts) == len(want) or len(pts) >= 1000),
                    "served %-22s %4d points of %d; %d differ" % (tag, len(pts), len(want), len(bad)))
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main(run, serve=False):
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader

    c = Checker()
    tbdir = os.path.join(run, "tb")
    files = sorted(glob.glob(os.path.join(tbdir, "events.out.tfevents.*")))
    c.check(len(files) > 0, "%d event file(s) in %s" % (len(files), tbdir))
    if not files:
        return 1
    for path in files:
        events = list(event_file_loader.EventFileLoader(path).Load())
        first = events[0] if events else None
        c.check(first is not None and first.file_version == "brain.Event:2",
                "%s: %d events, first file_version %r" % (os.path.basename(path), len(events),
                                                          first.file_version if first else None))

    acc = event_accumulator.EventAccumulator(tbdir, size_guidance={event_accumulator.SCALARS: 0},
                                             purge_orphaned_data=True)
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    print("tags: " + ", ".join(sorted(tags)))

    def scalars(tag):
        return {e.step: e.value for e in acc.Scalars(tag)} if tag in tags else {}

    def compare(tag, want):
        got = scalars(tag)
        bad = [s for s in want
               if s not in got or abs(got[s] - f32(want[s][0])) > max(1e-6 * abs(want[s][0]), want[s][1])]
        extra = sorted(set(got) - set(want))
        c.check(not bad and not extra,
                "%-22s %4d points, %d from the CSV; %d differ%s%s" % (
                    tag, len(got), len(want), len(bad),
                    (" (first at step %d: %r vs %r)" % (bad[0], got.get(bad[0]), want[bad[0]][0])) if bad else "",
                    (", %d extra steps (first %d)" % (len(extra), extra[0])) if extra else ""))

    metrics = read_csv(os.path.join(run, "metrics.csv")) or []
    for col, tag in [("loss", "train/loss"), ("lr", "train/lr"), ("grad_norm", "train/grad_norm"),
                     ("loss_scale", "train/loss_scale"), ("examples_per_s", "train/examples_per_s")]:
        want = {}
        for r in metrics:
            s, v = num(r.get("step")), num(r.get(col))
            if s is not None and v is not None:
                want[int(s)] = (v, text_tol(r[col]))  # the last row of a step wins
        if want:
            compare(tag, want)

    ev = read_csv(os.path.join(run, "eval.csv")) or metrics
    for cols, tag in [(("exact_match", "em", "EM"), "eval/exact_match"), (("f1", "F1"), "eval/f1")]:
        want = {}
        for r in ev:
            s = num(r.get("step"))
            k = next((k for k in cols if k in r and num(r[k]) is not None), None)
            if s is not None and k is not None:
                want[int(s)] = (num(r[k]), text_tol(r[k]))
        if want:
            compare(tag, want)

    mon = read_csv(os.path.join(run, "monitor.csv")) or []
    for col, tag, scale, tol in [("gpu_util_pct", "gpu/util_pct", 1, 0.5), ("gpu_temp_c", "gpu/temp_c", 1, 0.5),
                                 ("power_w", "gpu/power_w", 1, 0.006), ("sm_clock_mhz", "gpu/sm_clock_mhz", 1, 0.5),
                                 ("gpu_mem_used_mib", "gpu/mem_used_gib", 1 / 1024, 0.06 / 1024),
                                 ("cpu_pct", "cpu/process_pct", 1, 0.06), ("rss_mib", "cpu/rss_gib", 1 / 1024, 0.06 / 1024),
                                 ("mem_avail_mib", "cpu/mem_available_gib", 1 / 1024, 0.06 / 1024)]:
        vals = sorted(num(r.get(col)) * scale for r in mon if num(r.get(col)) is not None)
        if not vals:
            c.check(tag not in tags, "%-22s absent, as monitor.csv has no %s values" % (tag, col))
            continue
        got = [e.value for e in acc.Scalars(tag)] if tag in tags else []
        import bisect

        def near(v):
            i = bisect.bisect_left(vals, v - tol)
            return i < len(vals) and vals[i] <= v + tol

        bad = [v for v in got if not near(v)]
        c.check(got and len(got) <= len(vals) and not bad,
                "%-22s %4d points (monitor.csv has %d rows with a value); %d not in monitor.csv" % (
                    tag, len(got), len(vals), len(bad)))
    if serve:
        serve_check(c, tbdir, acc, tags)
    print("%d failure(s)" % c.failures)
    return 1 if c.failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--golden":
        golden()
        sys.exit(0)
    args = sys.argv[1:]
    serve = "--serve" in args
    args = [a for a in args if a != "--serve"]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[0], serve))
