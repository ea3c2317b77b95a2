#!/usr/bin/env python3
"""The transformers side of bench/serve/serve_vs_hf.sh: the same HTTP API as
`bertc serve` (POST /v1/answer {"context", "question"} -> {"answers": [{"text",
"start", "end", "score", ...}]}), answered in one Python process by
transformers, so that bench/serve/serve_load drives both servers with the same
requests.

transformers 5 removed pipeline("question-answering"); this does what that
pipeline did, by hand and the way run_qa.py's utils_qa.py post-processes: the
fast tokenizer's windows (truncation="only_second", max_length,
doc_stride, padded to max_length), one forward of the request's windows under
torch.inference_mode(), then the n-best (20 starts x 20 ends, answers of at
most 30 tokens, score = start + end logit). One model, one lock: requests are
answered one at a time (the pipeline has no cross-request batching).

  serve_hf.py --model DIR --port P [--threads 2] [--max-seq-length 384] [--doc-stride 128] [--onnx FILE]
                                       # --onnx: the forward pass in ONNX Runtime on FILE
                                       # (bench/serve/answers_engines.py --export writes
                                       # model_opt.onnx and model_int8.onnx), the rest as above
  serve_hf.py --export SRC --out DIR   # SRC as AutoModelForQuestionAnswering (qa_outputs
                                       # initialised when SRC has none), saved with its
                                       # tokenizer files, so bertc and transformers load
                                       # the same weights
"""
import argparse
import json
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer


def export(src, out):
    torch.manual_seed(42)
    m = AutoModelForQuestionAnswering.from_pretrained(src)
    m.save_pretrained(out, safe_serialization=True)
    for f in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (Path(src) / f).exists():
            shutil.copy(Path(src) / f, Path(out) / f)
    print(f"exported {src} -> {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--port", type=int, default=8081)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seq-length", type=int, default=384)
    ap.add_argument("--doc-stride", type=int, default=128)
    ap.add_argument("--onnx")
    ap.add_argument("--export")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.export:
        export(a.export, a.out)
        return
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model)
    lock = threading.Lock()
    if a.onnx:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]

        def forward(enc):
            return sess.run(None, {k: enc[k].numpy().astype(np.int64) for k in names})
    else:
        model = AutoModelForQuestionAnswering.from_pretrained(a.model).eval()

        def forward(enc):
            with torch.inference_mode():
                out = model(**enc)
            return out.start_logits.numpy(), out.end_logits.numpy()

    def answer(context, question, nbest):
        enc = tok(question, context, truncation="only_second", max_length=a.max_seq_length, stride=a.doc_stride,
                  return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length",
                  return_tensors="pt")
        offsets = enc.pop("offset_mapping").numpy()
        enc.pop("overflow_to_sample_mapping", None)
        seq_ids = [enc.sequence_ids(i) for i in range(len(offsets))]
        with lock:
            starts, ends = forward(enc)
        cands = []
        for w in range(len(offsets)):
            off = [o if seq_ids[w][k] == 1 else None for k, o in enumerate(offsets[w])]
            for s in np.argsort(starts[w])[-1:-21:-1]:
                for e in np.argsort(ends[w])[-1:-21:-1]:
                    if off[s] is None or off[e] is None or e < s or e - s + 1 > 30:
                        continue
                    b, f = int(off[s][0]), int(off[e][1])
                    cands.append((float(starts[w][s] + ends[w][e]), b, f, float(starts[w][s]), float(ends[w][e])))
        cands.sort(key=lambda c: -c[0])
        if not cands:  # as utils_qa.py: "empty" when no span is valid
            cands = [(0.0, -1, -1, 0.0, 0.0)]
        res = [{"text": context[b:f] if b >= 0 else "empty", "start": b, "end": f, "score": sc, "start_logit": sl, "end_logit": el}
               for sc, b, f, sl, el in cands[:nbest]]
        return {"answers": res, "windows": len(offsets)}

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, obj):
            body = (json.dumps(obj, ensure_ascii=False) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(n)
            try:
                req = json.loads(raw.decode("utf-8"))
                ctx, q = req["context"], req["question"]
                if not isinstance(ctx, str) or not isinstance(q, str) or not q:
                    raise ValueError("context and question must be strings")
            except Exception as e:  # noqa: BLE001
                self.reply(400, {"error": str(e), "status": 400})
                return
            self.reply(200, answer(ctx, q, int(req.get("nbest", 5))))

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # the default listen backlog of 5 resets connections at concurrency 32

    srv = Server(("127.0.0.1", a.port), H)
    srv.daemon_threads = True
    engine = f"onnxruntime on {a.onnx}" if a.onnx else "torch"
    print(f"serve_hf: listening on 127.0.0.1:{a.port} ({a.model}, {engine}, threads {a.threads})", file=sys.stderr,
          flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
