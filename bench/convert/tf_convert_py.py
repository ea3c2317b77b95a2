#!/usr/bin/env python3
"""The Python side of bench/convert/tf_convert.sh: what `from_pretrained(..., from_tf=True)`
+ `save_pretrained` did in transformers 4 for a Google checkpoint, without
torch: TensorFlow's reader (tf.train.load_checkpoint), the name mapping of
load_tf_weights_in_bert (kernels transposed, gamma/beta), and
safetensors.numpy.save_file. Prints the seconds of load+map and of save.

    python3 bench/convert/tf_convert_py.py GOOGLE_DIR OUT_DIR
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
t0 = time.perf_counter()
import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

t_import = time.perf_counter() - t0
src, dst = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
cfg = json.load(open(os.path.join(src, "bert_config.json")))
r = tf.train.load_checkpoint(os.path.join(src, "bert_model.ckpt"))
sd = {}
for name in r.get_variable_to_shape_map():
    if name.endswith(("adam_m", "adam_v")) or name == "global_step" or name.startswith(("bert/pooler", "cls/predictions", "cls/seq_relationship")):
        continue
    a = r.get_tensor(name)
    if name == "cls/squad/output_weights":
        hf = "qa_outputs.weight"
    elif name == "cls/squad/output_bias":
        hf = "qa_outputs.bias"
    else:
        parts = name.split("/")
        out = []
        for p in parts:
            if p.startswith("layer_"):
                out += ["layer", p[6:]]
            elif p == "kernel":
                out.append("weight")
                a = a.T
            elif p == "gamma":
                out.append("weight")
            elif p == "beta":
                out.append("bias")
            else:
                out.append(p)
        if name.startswith("bert/embeddings/") and "LayerNorm" not in name:
            out.append("weight")
        hf = ".".join(out)
    sd[hf] = np.ascontiguousarray(a, dtype=np.float32)
t_load = time.perf_counter() - t0
t0 = time.perf_counter()
os.makedirs(dst, exist_ok=True)
save_file(sd, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
t_save = time.perf_counter() - t0
print("python: import %.2f s, load+map %.2f s, save %.2f s, total (without import) %.2f s, %d tensors"
      % (t_import, t_load, t_save, t_load + t_save, len(sd)))
