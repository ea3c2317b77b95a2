#!/usr/bin/env python3
"""The peers' side of bench/serve/answers_vs_engines.sh: the forward pass of
the same QA model over the same windows (bertc features --dump) in ONNX
Runtime and OpenVINO, the engines CPU users deploy, on the same threads.

  answers_engines.py --export MODEL_DIR --out DIR
      DIR/model.onnx: MODEL_DIR (a BertForQuestionAnswering saved by
      transformers) exported by torch (eager attention, opset 17, dynamic batch
      and sequence); DIR/model_opt.onnx: optimised by
      onnxruntime.transformers.optimizer (model_type bert);
      DIR/model_int8.onnx: model_opt.onnx through quantize_dynamic (QInt8
      weights per channel; activations per tensor at run time).
  answers_engines.py --dir DIR --features FEAT --threads N [--batch 8] [--only NAME,...]
      FEAT: the .npy files of `bertc features --dump`. Runs each system over
      every window: "padded" (batches of `batch` windows padded to T) and
      "sorted" (windows sorted by length, each batch padded to its longest),
      and prints one JSON line per system: name, windows, seconds, windows/s.
      OpenVINO's int8 is NNCF post-training quantisation of model.onnx with 64
      calibration windows (the first 64 sorted batches' windows), compiled
      with the f32 and the bf16 precision hint.
Only the forward passes are timed (the engines' inputs prepared before the
clock starts); bertc's figure is its whole command, features and n-best
included.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def export(model_dir, out):
    import torch
    from transformers import BertForQuestionAnswering
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    m = BertForQuestionAnswering.from_pretrained(model_dir, attn_implementation="eager").eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.inference_mode():
        torch.onnx.export(m, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(out / "model.onnx"),
                          input_names=names, output_names=["start_logits", "end_logits"],
                          dynamic_axes={k: {0: "batch", 1: "seq"} for k in names + ["start_logits", "end_logits"]},
                          opset_version=17, dynamo=False)
    from onnxruntime.transformers import optimizer
    cfg = m.config
    opt = optimizer.optimize_model(str(out / "model.onnx"), model_type="bert", num_heads=cfg.num_attention_heads,
                                   hidden_size=cfg.hidden_size)
    opt.save_model_to_file(str(out / "model_opt.onnx"))
    from onnxruntime.quantization import QuantType, quantize_dynamic
    import onnx
    # the fused graph's contrib ops defeat shape inference: their outputs are float
    quantize_dynamic(str(out / "model_opt.onnx"), str(out / "model_int8.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    print(f"exported {model_dir} -> {out}/model.onnx, model_opt.onnx, model_int8.onnx", file=sys.stderr)


def batches(ids, tt, mask, batch, order):
    """(input_ids, attention_mask, token_type_ids) int64 batches; order "padded"
    keeps the windows' order and length T, "sorted" sorts by length and cuts
    each batch to its longest window."""
    lens = mask.sum(1)
    idx = np.argsort(lens, kind="stable") if order == "sorted" else np.arange(len(ids))
    out = []
    for i in range(0, len(idx), batch):
        b = idx[i:i + batch]
        t = int(lens[b].max()) if order == "sorted" else ids.shape[1]
        out.append({"input_ids": ids[b, :t].astype(np.int64), "attention_mask": mask[b, :t].astype(np.int64),
                    "token_type_ids": tt[b, :t].astype(np.int64)})
    return out


def timed(run, feeds):
    run(feeds[0])  # warm-up (first-shape compilation)
    t0 = time.perf_counter()
    for f in feeds:
        run(f)
    return time.perf_counter() - t0


def ort_runner(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in s.get_inputs()}
    return lambda f: s.run(None, {k: v for k, v in f.items() if k in names})


def ov_runner(model, threads, precision):
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints
    core = ov.Core()
    c = core.compile_model(model, "CPU", {props.inference_num_threads: threads, hints.inference_precision: precision,
                                          hints.performance_mode: hints.PerformanceMode.LATENCY})
    req = c.create_infer_request()
    names = {i.get_any_name() for i in c.inputs}
    return lambda f: req.infer({k: v for k, v in f.items() if k in names})


def ov_int8_model(onnx_path, calib):
    import nncf
    import openvino as ov
    m = ov.Core().read_model(str(onnx_path))
    names = {i.get_any_name() for i in m.inputs}
    data = nncf.Dataset(calib, lambda f: {k: v for k, v in f.items() if k in names})
    return nncf.quantize(m, data, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calib))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export")
    ap.add_argument("--out")
    ap.add_argument("--dir")
    ap.add_argument("--features")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if a.export:
        export(a.export, a.out)
        return
    d, fd = Path(a.dir), Path(a.features)
    ids, tt, mask = (np.load(fd / f) for f in ("input_ids.npy", "token_type_ids.npy", "attention_mask.npy"))
    n = len(ids)
    feeds = {o: batches(ids, tt, mask, a.batch, o) for o in ("padded", "sorted")}
    calib = [{k: v[i:i + 1] for k, v in f.items()} for f in feeds["sorted"][::max(1, len(feeds["sorted"]) // 8)]
             for i in range(min(8, len(f["input_ids"])))][:64]
    import onnxruntime
    import openvino
    print(json.dumps({"onnxruntime": onnxruntime.__version__, "openvino": openvino.__version__, "windows": n,
                      "mean_len": float(mask.sum(1).mean()), "T": int(ids.shape[1])}), flush=True)
    systems = [
        ("ort-fp32-padded", lambda: ort_runner(d / "model_opt.onnx", a.threads), "padded"),
        ("ort-fp32-sorted", lambda: ort_runner(d / "model_opt.onnx", a.threads), "sorted"),
        ("ort-int8-padded", lambda: ort_runner(d / "model_int8.onnx", a.threads), "padded"),
        ("ort-int8-sorted", lambda: ort_runner(d / "model_int8.onnx", a.threads), "sorted"),
        ("ov-fp32-sorted", lambda: ov_runner(str(d / "model.onnx"), a.threads, "f32"), "sorted"),
        ("ov-bf16-sorted", lambda: ov_runner(str(d / "model.onnx"), a.threads, "bf16"), "sorted"),
        ("ov-int8-f32-sorted", lambda: ov_runner(ov_int8_model(d / "model.onnx", calib), a.threads, "f32"), "sorted"),
        ("ov-int8-bf16-sorted", lambda: ov_runner(ov_int8_model(d / "model.onnx", calib), a.threads, "bf16"), "sorted"),
    ]
    only = set(a.only.split(",")) - {""}
    for name, make, order in systems:
        if only and name not in only:
            continue
        run = make()
        s = timed(run, feeds[order])
        print(json.dumps({"system": name, "windows": n, "seconds": round(s, 3), "windows_per_s": round(n / s, 1)}),
              flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
