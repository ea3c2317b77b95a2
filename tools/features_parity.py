#!/usr/bin/env python3
"""Reference features for tests/data/test_features.c, made as run_qa.py makes them.

prepare_train_features and prepare_validation_features below follow
transformers' examples/pytorch/question-answering/run_qa.py (pad_on_right,
pad_to_max_length=True), with BertTokenizerFast on the vocabularies in
../shared/data/vocab. The answers they see are the ones bertc's SQuAD reader
keeps: an answer whose answer_start does not point at its text is moved to
the nearest occurrence (ties: the earlier), and one whose text is not in the
context (or is empty) is dropped, so answers[0] is bertc's train_answer.

Output, one file per setting, tests/ref/features/NAME_T<T>_S<S>.bin, little-endian:
  char[8] "BERTCFR1"
  int32 n_features, T, doc_stride, n_full, n_examples, 0, 0, 0
  uint64 array_hash[5]             whole-set hash of input_ids, token_type_ids,
                                   attention_mask, offset_begin, offset_end
  int32 start[n], end[n], example[n]
  uint64 row_hash[n]               hash of the feature's five rows together
  int32 [n_full][5][T]             the five rows of the first n_full features
Offsets are code point offsets; -1 where prepare_validation_features puts
None (tokens that are not context).

Row hash (test_features.c computes the same): for array a (0..4) and
position k, m(a, k) = splitmix64(0x5eed0000 + a * 4096 + k) | 1; a row sums
(uint64)(int64)value * m(a, k) over k, wrapping; the feature's hash is
splitmix64 of the sum over its five rows; an array's whole-set hash is
splitmix64 of the wrapping sum of splitmix64(row sum) * (2 * feature + 1).

  python3 tools/features_parity.py                # write all settings
  python3 tools/features_parity.py --only squad2_T128_S32   # write one
  python3 tools/features_parity.py --show squad_T384_S128 5   # print feature 5
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("BERTC_DATA", os.path.join(ROOT, "..", "shared", "data"))

DATASETS = {
    "squad": ("squad-v1.1/dev-v1.1.json", "bert-base-uncased-vocab.txt", True),
    "cmrc": ("cmrc2018/cmrc2018_trial.json", "bert-base-chinese-vocab.txt", False),
    # SQuAD dev made v2 (tools/squad2_eval_ref.py), in this repository: a third of the questions have no answer
    "squad2": ("@tests/data/squad2_dev_slice.json", "bert-base-uncased-vocab.txt", True),
}
SETTINGS = [("squad", 384, 128), ("cmrc", 384, 128), ("squad", 64, 16), ("cmrc", 64, 16), ("squad2", 128, 32)]
N_FULL = 16


def load_tokenizer(name):
    from transformers import BertTokenizerFast

    _, vocab, lower = DATASETS[name]
    return BertTokenizerFast(os.path.join(DATA, "vocab", vocab), do_lower_case=lower)


def relocate(context, text, start):
    """bertc's rule: keep, move to the nearest occurrence, or None."""
    if not text:
        return None
    if 0 <= start and context[start:start + len(text)] == text:
        return start
    best = None
    i = context.find(text)
    while i >= 0:
        if best is None or abs(i - start) < abs(best - start):
            best = i
        if i >= start:
            break
        i = context.find(text, i + 1)
    return best


def load_examples(name):
    """The examples as run_qa.py's datasets columns, answers as bertc keeps them."""
    rel = DATASETS[name][0]
    path = os.path.join(ROOT, rel[1:]) if rel.startswith("@") else os.path.join(DATA, rel)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    ex = {"id": [], "question": [], "context": [], "answers": []}
    for art in data["data"]:
        for par in art["paragraphs"]:
            ctx = par["context"]
            for qa in par["qas"]:
                texts, starts = [], []
                for a in qa["answers"]:
                    s = relocate(ctx, a["text"], a["answer_start"])
                    if s is not None:
                        texts.append(a["text"])
                        starts.append(s)
                ex["id"].append(qa["id"])
                ex["question"].append(qa["question"])
                ex["context"].append(ctx)
                ex["answers"].append({"text": texts, "answer_start": starts})
    return ex


# --- run_qa.py, prepare_train_features / prepare_validation_features -------

def tokenize_windows(examples, tokenizer, max_seq_length, doc_stride):
    """The tokenizer call that both prepare_* functions of run_qa.py open with."""
    question_column_name, context_column_name = "question", "context"
    pad_on_right = tokenizer.padding_side == "right"
    examples[question_column_name] = [q.lstrip() for q in examples[question_column_name]]
    tokenized_examples = tokenizer(
        examples[question_column_name if pad_on_right else context_column_name],
        examples[context_column_name if pad_on_right else question_column_name],
        truncation="only_second" if pad_on_right else "only_first",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    return pad_on_right, tokenized_examples


def prepare_train_features(examples, tokenizer, max_seq_length, doc_stride):
    answer_column_name = "answers"
    pad_on_right, tokenized_examples = tokenize_windows(examples, tokenizer, max_seq_length, doc_stride)
    sample_mapping = tokenized_examples.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized_examples.pop("offset_mapping")
    tokenized_examples["start_positions"] = []
    tokenized_examples["end_positions"] = []
    tokenized_examples["overflow_to_sample_mapping"] = sample_mapping  # kept for the comparison
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized_examples["input_ids"][i]
        if tokenizer.cls_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.cls_token_id)
        elif tokenizer.bos_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.bos_token_id)
        else:
            cls_index = 0
        sequence_ids = tokenized_examples.sequence_ids(i)
        sample_index = sample_mapping[i]
        answers = examples[answer_column_name][sample_index]
        if len(answers["answer_start"]) == 0:
            tokenized_examples["start_positions"].append(cls_index)
            tokenized_examples["end_positions"].append(cls_index)
        else:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start_index = 0
            while sequence_ids[token_start_index] != (1 if pad_on_right else 0):
                token_start_index += 1
            token_end_index = len(input_ids) - 1
            while sequence_ids[token_end_index] != (1 if pad_on_right else 0):
                token_end_index -= 1
            if not (offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char):
                tokenized_examples["start_positions"].append(cls_index)
                tokenized_examples["end_positions"].append(cls_index)
            else:
                while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                    token_start_index += 1
                tokenized_examples["start_positions"].append(token_start_index - 1)
                while offsets[token_end_index][1] >= end_char:
                    token_end_index -= 1
                tokenized_examples["end_positions"].append(token_end_index + 1)
    return tokenized_examples


def prepare_validation_features(examples, tokenizer, max_seq_length, doc_stride):
    pad_on_right, tokenized_examples = tokenize_windows(examples, tokenizer, max_seq_length, doc_stride)
    sample_mapping = tokenized_examples.pop("overflow_to_sample_mapping")
    tokenized_examples["example_id"] = []
    tokenized_examples["overflow_to_sample_mapping"] = sample_mapping  # kept for the comparison
    for i in range(len(tokenized_examples["input_ids"])):
        sequence_ids = tokenized_examples.sequence_ids(i)
        context_index = 1 if pad_on_right else 0
        sample_index = sample_mapping[i]
        tokenized_examples["example_id"].append(examples["id"][sample_index])
        tokenized_examples["offset_mapping"][i] = [
            (o if sequence_ids[k] == context_index else None)
            for k, o in enumerate(tokenized_examples["offset_mapping"][i])
        ]
    return tokenized_examples


# --- arrays and hashes -------------------------------------------------------

M64 = (1 << 64) - 1


def splitmix64_np(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def multipliers(T):
    a = np.arange(5, dtype=np.uint64)[:, None] * np.uint64(4096) + np.arange(T, dtype=np.uint64)[None, :]
    return splitmix64_np(np.uint64(0x5EED0000) + a) | np.uint64(1)  # [5, T]


def hashes(rows):
    """rows: int64 [5, n, T] -> (row_hash [n], array_hash [5])."""
    n, T = rows.shape[1], rows.shape[2]
    m = multipliers(T)
    with np.errstate(over="ignore"):
        sums = (rows.view(np.uint64) * m[:, None, :]).sum(axis=2, dtype=np.uint64)  # [5, n]
        row_hash = splitmix64_np(sums.sum(axis=0, dtype=np.uint64))
        w = np.arange(n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        array_hash = splitmix64_np((splitmix64_np(sums) * w[None, :]).sum(axis=1, dtype=np.uint64))
    return row_hash, array_hash


def build(name, T, S, tokenizer=None):
    tok = tokenizer or load_tokenizer(name)
    ex = load_examples(name)
    tr = prepare_train_features(dict(ex), tok, T, S)
    va = prepare_validation_features(dict(ex), tok, T, S)
    ids = np.array(tr["input_ids"], dtype=np.int64)
    assert np.array_equal(ids, np.array(va["input_ids"], dtype=np.int64)), "train and validation windows differ"
    assert list(tr["overflow_to_sample_mapping"]) == list(va["overflow_to_sample_mapping"])
    n = ids.shape[0]
    ob = np.full((n, T), -1, dtype=np.int64)
    oe = np.full((n, T), -1, dtype=np.int64)
    for i, offs in enumerate(va["offset_mapping"]):
        for k, o in enumerate(offs):
            if o is not None:
                ob[i, k], oe[i, k] = o
    rows = np.stack([ids, np.array(tr["token_type_ids"], dtype=np.int64), np.array(tr["attention_mask"], dtype=np.int64),
                     ob, oe])
    labels = np.stack([np.array(tr["start_positions"]), np.array(tr["end_positions"]),
                       np.array(tr["overflow_to_sample_mapping"])]).astype(np.int32)
    return rows, labels, len(ex["id"])


def write(path, rows, labels, n_examples, T, S):
    n = rows.shape[1]
    row_hash, array_hash = hashes(rows)
    nf = min(N_FULL, n)
    with open(path + ".tmp", "wb") as f:
        f.write(b"BERTCFR1")
        f.write(struct.pack("<8i", n, T, S, nf, n_examples, 0, 0, 0))
        f.write(array_hash.astype("<u8").tobytes())
        f.write(labels.astype("<i4").tobytes())
        f.write(row_hash.astype("<u8").tobytes())
        f.write(rows[:, :nf, :].transpose(1, 0, 2).astype("<i4").tobytes())
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "ref", "features"))
    ap.add_argument("--show", nargs=2, metavar=("SETTING", "FEATURE"), help="print one feature of a setting")
    ap.add_argument("--only", metavar="SETTING", help="write only this setting (e.g. squad2_T128_S32)")
    args = ap.parse_args()
    if args.show:
        name, t, s = args.show[0].split("_")
        T, S, i = int(t[1:]), int(s[1:]), int(args.show[1])
        rows, labels, _ = build(name, T, S)
        tok = load_tokenizer(name)
        print("example", labels[2, i], "start", labels[0, i], "end", labels[1, i])
        print("tokens", tok.convert_ids_to_tokens([int(x) for x in rows[0, i]]))
        for a, nm in enumerate(["input_ids", "token_type_ids", "attention_mask", "offset_begin", "offset_end"]):
            print(nm, rows[a, i].tolist())
        return
    os.makedirs(args.out, exist_ok=True)
    for name, T, S in SETTINGS:
        if args.only and args.only != f"{name}_T{T}_S{S}":
            continue
        rows, labels, n_examples = build(name, T, S)
        path = os.path.join(args.out, f"{name}_T{T}_S{S}.bin")
        write(path, rows, labels, n_examples, T, S)
        inside = int(((labels[0] != 0) | (labels[1] != 0)).sum())
        print(f"{path}: {rows.shape[1]} features of {n_examples} examples, {inside} hold their answer, "
              f"{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    sys.exit(main())
