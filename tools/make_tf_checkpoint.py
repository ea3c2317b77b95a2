#!/usr/bin/env python3
"""Writes TensorFlow BERT checkpoints, as Google's BERT release and its
run_squad.py write them, for the C tensor-bundle reader (src/model/tf_bundle.c).

The checkpoints are written by real TensorFlow (tensorflow-cpu from PyPI,
tf.compat.v1.train.Saver, the V2 tensor-bundle format); the reference logits
are computed by transformers' BertForQuestionAnswering from the tensors that
TensorFlow's own reader (tf.train.load_checkpoint) gives back, mapped to
transformers' names in Python (kernels transposed, gamma/beta to
weight/bias), so that neither the reader nor the mapping is bertc's.
transformers 5 no longer has load_tf_weights_in_bert; the mapping below is
the one it applied.

Default (from the repo root: python3 tools/make_tf_checkpoint.py):
  tests/ref/tf/google/   bert_config.json, vocab.txt, bert_model.ckpt.index,
                         bert_model.ckpt.data-00000-of-00001: a tiny
                         run_squad-fine-tuned BERT (L2 H64 A4 I128, vocab
                         100, 64 positions) with cls/squad/output_weights|
                         output_bias, the pooler, the MLM and NSP heads, Adam
                         slots (adam_m, adam_v) and global_step, which a
                         loader must skip
  tests/ref/tf/reference.safetensors
                         input_ids, token_type_ids, attention_mask [B,T]
                         int32, start_logits, end_logits [B,T] (float64
                         forward rounded once to float32), shape [2] int32
  tests/bad/good/tf/     the same layout at the size of tests/bad/good/model
                         (L1 H8 A2 I16, its 16-token vocab.txt): the good
                         Google dir the bad cases are made from
  tests/bad/model/tf_*   the bad cases (see tests/bad/model/expected.txt)
  tests/ref/tf/pretrained/
                         a pre-trained checkpoint at that size: no cls/squad
  tests/ref/tf/sharded/  tests/bad/good/tf's variables over 3 data shards

--base DIR: the same script at BERT-base size (L12 H768 A12 I3072, vocab
30522, 512 positions, with Adam slots like Google's fine-tuned checkpoints),
written to DIR and not committed: the load/convert benchmark's input.
"""
import argparse
import json
import os
import shutil
import struct

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import subprocess
import sys
import tempfile

import numpy as np

tf = None  # imported in main: TensorFlow and torch in one process abort (LLVM option clash)

B, T = 3, 24


def bert_config(L, H, A, I, V, P):
    # Google's bert_config.json: these eleven fields, no layer_norm_eps.
    return {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": H,
        "initializer_range": 0.02,
        "intermediate_size": I,
        "max_position_embeddings": P,
        "num_attention_heads": A,
        "num_hidden_layers": L,
        "type_vocab_size": 2,
        "vocab_size": V,
    }


def google_variables(cfg, rng, adam_all, squad=True):
    """The variables of a run_squad-fine-tuned Google BERT checkpoint, by name."""
    H, I, V, P, L = (cfg[k] for k in ("hidden_size", "intermediate_size", "vocab_size",
                                      "max_position_embeddings", "num_hidden_layers"))
    f = np.float32

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(f)

    def ln(prefix, out):
        # Not 1 and 0: a gamma/beta mix-up must show in the logits.
        out[prefix + "/gamma"] = (1.0 + rng.standard_normal(H) * 0.1).astype(f)
        out[prefix + "/beta"] = (rng.standard_normal(H) * 0.1).astype(f)

    v = {}
    v["bert/embeddings/word_embeddings"] = normal(V, H)
    v["bert/embeddings/token_type_embeddings"] = normal(2, H)
    v["bert/embeddings/position_embeddings"] = normal(P, H)
    ln("bert/embeddings/LayerNorm", v)
    for l in range(L):
        p = "bert/encoder/layer_%d/" % l
        for n in ("query", "key", "value"):
            v[p + "attention/self/%s/kernel" % n] = normal(H, H, std=0.1)  # [in, out]
            v[p + "attention/self/%s/bias" % n] = normal(H)
        v[p + "attention/output/dense/kernel"] = normal(H, H)
        v[p + "attention/output/dense/bias"] = normal(H)
        ln(p + "attention/output/LayerNorm", v)
        v[p + "intermediate/dense/kernel"] = normal(H, I)
        v[p + "intermediate/dense/bias"] = normal(I)
        v[p + "output/dense/kernel"] = normal(I, H)
        v[p + "output/dense/bias"] = normal(H)
        ln(p + "output/LayerNorm", v)
    v["bert/pooler/dense/kernel"] = normal(H, H)
    v["bert/pooler/dense/bias"] = normal(H)
    # run_squad.py's head: output_weights is [2, H] (logits = x W^T + b).
    if squad:
        v["cls/squad/output_weights"] = normal(2, H, std=0.5)
        v["cls/squad/output_bias"] = normal(2, std=0.1)
    # The pre-training heads a fine-tuned checkpoint still carries.
    v["cls/predictions/output_bias"] = normal(V)
    v["cls/predictions/transform/dense/kernel"] = normal(H, H)
    v["cls/predictions/transform/dense/bias"] = normal(H)
    ln("cls/predictions/transform/LayerNorm", v)
    v["cls/seq_relationship/output_weights"] = normal(2, H)
    v["cls/seq_relationship/output_bias"] = normal(2)
    names = list(v) if adam_all else [n for n in ("bert/embeddings/LayerNorm/gamma", "cls/squad/output_bias",
                                                  "bert/encoder/layer_0/attention/self/query/bias") if n in v]
    for n in names:
        v[n + "/adam_m"] = normal(*v[n].shape, std=1e-3)
        v[n + "/adam_v"] = np.abs(normal(*v[n].shape, std=1e-6))
    return v


def save_checkpoint(variables, prefix, shards=1):
    """Writes PREFIX.index and PREFIX.data-00000-of-00001 with TF's Saver.

    Each value goes in through a placeholder, one variable at a time: as
    graph constants a BERT-base-sized set would be copied into the graph."""
    g = tf.Graph()
    with g.as_default():
        tvars, feeds = [], []
        for i, (n, a) in enumerate(variables.items()):
            # shards > 1: the variables spread over that many (virtual) CPU
            # devices; a sharded Saver writes one data file per device.
            with tf.device("/cpu:%d" % (i % shards)):
                v = tf.compat.v1.get_variable(n, shape=a.shape, dtype=tf.float32, trainable=False,
                                              initializer=tf.compat.v1.zeros_initializer())
            ph = tf.compat.v1.placeholder(tf.float32, shape=a.shape)
            tvars.append(v)
            feeds.append((v.assign(ph), ph, n))
        gs = tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver(tvars + [gs], sharded=shards > 1)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": shards})
        with tf.compat.v1.Session(graph=g, config=config) as s:
            s.run(tf.compat.v1.global_variables_initializer())
            for op, ph, n in feeds:
                s.run(op, feed_dict={ph: variables[n]})
            s.run(gs.assign(1234))
            saver.save(s, prefix, write_meta_graph=False, write_state=False)


def write_dir(d, cfg, vocab, rng, adam_all=False, squad=True, shards=1):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "bert_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    v = google_variables(cfg, rng, adam_all, squad)
    save_checkpoint(v, os.path.join(d, "bert_model.ckpt"), shards)
    return v


def hf_state_dict(prefix, L):
    """Reads the checkpoint back with TF's reader and maps it to transformers' names."""
    r = tf.train.load_checkpoint(prefix)
    sd = {}
    tr = lambda n: r.get_tensor(n).T.copy()
    get = r.get_tensor
    e = "bert/embeddings/"
    sd["bert.embeddings.word_embeddings.weight"] = get(e + "word_embeddings")
    sd["bert.embeddings.position_embeddings.weight"] = get(e + "position_embeddings")
    sd["bert.embeddings.token_type_embeddings.weight"] = get(e + "token_type_embeddings")
    sd["bert.embeddings.LayerNorm.weight"] = get(e + "LayerNorm/gamma")
    sd["bert.embeddings.LayerNorm.bias"] = get(e + "LayerNorm/beta")
    for l in range(L):
        p, q = "bert/encoder/layer_%d/" % l, "bert.encoder.layer.%d." % l
        for tfn, hfn in (("attention/self/query", "attention.self.query"),
                         ("attention/self/key", "attention.self.key"),
                         ("attention/self/value", "attention.self.value"),
                         ("attention/output/dense", "attention.output.dense"),
                         ("intermediate/dense", "intermediate.dense"),
                         ("output/dense", "output.dense")):
            sd[q + hfn + ".weight"] = tr(p + tfn + "/kernel")
            sd[q + hfn + ".bias"] = get(p + tfn + "/bias")
        for tfn, hfn in (("attention/output/LayerNorm", "attention.output.LayerNorm"),
                         ("output/LayerNorm", "output.LayerNorm")):
            sd[q + hfn + ".weight"] = get(p + tfn + "/gamma")
            sd[q + hfn + ".bias"] = get(p + tfn + "/beta")
    sd["qa_outputs.weight"] = get("cls/squad/output_weights")
    sd["qa_outputs.bias"] = get("cls/squad/output_bias")
    return sd


def reference_logits(cfg, sd, out_path):
    import torch
    from safetensors.numpy import save_file
    from transformers import BertConfig, BertForQuestionAnswering

    hc = BertConfig(**cfg, layer_norm_eps=1e-12, attn_implementation="eager")
    m = BertForQuestionAnswering(hc).eval()
    missing, unexpected = m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=False)
    missing = [k for k in missing if not k.startswith("bert.pooler") and "position_ids" not in k]
    assert not missing and not unexpected, (missing, unexpected)
    rng = np.random.default_rng(5)
    ids = rng.integers(5, cfg["vocab_size"], size=(B, T)).astype(np.int32)
    ids[:, 0] = 2  # [CLS]
    types = np.zeros((B, T), np.int32)
    types[:, T // 3:] = 1
    mask = np.ones((B, T), np.int32)
    mask[1, T - 5:] = 0
    mask[2, T // 2:] = 0
    ids[mask == 0] = 0
    m = m.double()
    with torch.no_grad():
        o = m(input_ids=torch.from_numpy(ids).long(), token_type_ids=torch.from_numpy(types).long(),
              attention_mask=torch.from_numpy(mask).long())
    save_file({
        "input_ids": ids, "token_type_ids": types, "attention_mask": mask,
        "start_logits": o.start_logits.numpy().astype(np.float32),
        "end_logits": o.end_logits.numpy().astype(np.float32),
        "shape": np.array([B, T], np.int32),
    }, out_path)
    os.chmod(out_path, 0o644)
    print("wrote %s (start_logits[0,:4] %s)" % (out_path, o.start_logits[0, :4].numpy()))


def read(p):
    with open(p, "rb") as f:
        return f.read()


def write(p, b):
    with open(p, "wb") as f:
        f.write(b)


def bad_cases(good, bad_root):
    """Each case: a copy of the good Google dir with one thing broken."""
    idx = read(os.path.join(good, "bert_model.ckpt.index"))
    data = read(os.path.join(good, "bert_model.ckpt.data-00000-of-00001"))

    def case(name, index=idx, shard=data, cfg_edit=None, drop_shard=False):
        d = os.path.join(bad_root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in ("vocab.txt", "bert_config.json"):
            shutil.copy(os.path.join(good, f), d)
        write(os.path.join(d, "bert_model.ckpt.index"), index)
        if not drop_shard:
            write(os.path.join(d, "bert_model.ckpt.data-00000-of-00001"), shard)
        if cfg_edit:
            c = json.load(open(os.path.join(d, "bert_config.json")))
            c.update(cfg_edit)
            with open(os.path.join(d, "bert_config.json"), "w") as f:
                json.dump(c, f, indent=2, sort_keys=True)
                f.write("\n")

    case("tf_truncated_index", index=idx[:len(idx) - 20])
    case("tf_bad_magic", index=idx[:-1] + bytes([idx[-1] ^ 0xFF]))
    # A flipped byte inside the first block (the header entry's key/value):
    # the block's masked crc32c no longer matches.
    b = bytearray(idx)
    b[5] ^= 0x01
    case("tf_bad_block_crc", index=bytes(b))
    # A flipped byte in the data of the first tensor: its entry's crc32c.
    s = bytearray(data)
    s[1] ^= 0x40
    case("tf_bad_tensor_crc", shard=bytes(s))
    case("tf_missing_shard", drop_shard=True)
    case("tf_truncated_shard", shard=data[:len(data) // 2])
    case("tf_shape_mismatch", cfg_edit={"intermediate_size": 32})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", help="write a BERT-base-sized checkpoint to this dir instead")
    ap.add_argument("--_reference", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._reference:
        sd = dict(np.load(a._reference[0]))
        reference_logits(json.loads(a._reference[1]), sd, a._reference[2])
        return
    global tf
    import tensorflow
    tf = tensorflow
    tf.compat.v1.disable_eager_execution()
    if a.base:
        cfg = bert_config(12, 768, 12, 3072, 30522, 512)
        vocab = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        vocab += ["tok%d" % i for i in range(30522 - len(vocab))]
        write_dir(a.base, cfg, vocab, np.random.default_rng(11), adam_all=True)
        print("wrote", a.base)
        return
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = ("the a of and to in is was on for with as by at from it that this cat sat mat dog ran "
             "park city river king queen war year first new one two three four five who what when "
             "where which how why name born died").split()
    vocab = specials + words + ["##s", "##ed", "##ing", ".", ",", "?", "!", "'", '"', "-", "(", ")"]
    vocab += [c for c in "bcdefghijklmnopqrstuvwxyz0123456789"]
    vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"][:100 - len(vocab)]
    assert len(vocab) == 100 and len(set(vocab)) == 100, len(vocab)
    cfg = bert_config(2, 64, 4, 128, 100, 64)
    g = "tests/ref/tf/google"
    shutil.rmtree(g, ignore_errors=True)
    write_dir(g, cfg, vocab, np.random.default_rng(3))
    sd = hf_state_dict(os.path.join(g, "bert_model.ckpt"), 2)
    # transformers in a process of its own, without TensorFlow.
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "sd.npz"), **sd)
        subprocess.run([sys.executable, __file__, "--_reference", os.path.join(tmp, "sd.npz"),
                        json.dumps(cfg), "tests/ref/tf/reference.safetensors"], check=True)
    good = "tests/bad/good/tf"
    shutil.rmtree(good, ignore_errors=True)
    gv = [t.strip() for t in open("tests/bad/good/model/vocab.txt")]
    write_dir(good, bert_config(1, 8, 2, 16, len(gv), 64), gv, np.random.default_rng(4))
    bad_cases(good, "tests/bad/model")
    # A pre-trained checkpoint (no cls/squad): qa_outputs are initialised.
    pre = "tests/ref/tf/pretrained"
    shutil.rmtree(pre, ignore_errors=True)
    write_dir(pre, bert_config(1, 8, 2, 16, len(gv), 64), gv, np.random.default_rng(6), squad=False)
    # The good dir's variables again, over 3 data shards.
    sh = "tests/ref/tf/sharded"
    shutil.rmtree(sh, ignore_errors=True)
    write_dir(sh, bert_config(1, 8, 2, 16, len(gv), 64), gv, np.random.default_rng(4), shards=3)
    print("wrote", g, good, "and the tests/bad/model/tf_* cases")


if __name__ == "__main__":
    main()
