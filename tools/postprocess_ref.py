#!/usr/bin/env python3
"""Reference files for tests/infer/test_postprocess.c.

Takes every 50th question of SQuAD v1.1 dev (212 questions), builds the
validation features as run_qa.py's prepare_validation_features does with the
bert-base-uncased fast tokenizer, for two settings: T=384 stride 128, and
T=128 stride 32 (many examples with several windows). Draws logits with a fixed
seed, with ties on purpose (rows rounded to 0.5, rows of zeros), rows that leave
no valid span (high logits on question and padding tokens, or every end before
every start), and runs postprocess_qa_predictions as transformers' utils_qa.py
writes it (SQuAD v1.1: no null answer), reimplemented step by step below.

np.argsort's default kind orders equal values in a way that depends on the CPU
(numpy's SIMD sorts on AVX2 / AVX-512, introsort elsewhere). The reference uses
kind="stable", which bertc reproduces everywhere; the script prints how many
examples the platform default would change.

    python3 tools/postprocess_ref.py [--data ../shared/data] [--out tests/ref/postprocess]

Binary layout (little-endian), one file per setting, squad_T{T}.bin:
  8s magic "BQAPP001"; u32 n_examples, n_features, T, n_best, max_answer_length
  n_examples x (u16 len, id bytes)
  n_features x (i32 example, u16 offset_begin[T], u16 offset_end[T] (0xFFFF = None),
                f32 start_logits[T], f32 end_logits[T])
  n_examples x (u16 len, prediction bytes, u16 n_nbest,
                n_nbest x (f32 score, f32 start_logit, f32 end_logit, f64 probability, u64 text_hash))
  u64 hash of predictions.json (json.dumps(indent=4, ensure_ascii=False) + "\\n")
  u64 hash of nbest_predictions.json (the same dump of the n-best lists)
Hashes are 64-bit FNV-1a (src/core/fileio.c hash64).
"""
import argparse
import collections
import json
import os
import struct
import tempfile

import numpy as np
from transformers import AutoTokenizer

N_BEST = 20
MAX_ANSWER_LENGTH = 30


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h ^= x
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def load_slice(path, every):
    with open(path) as f:
        dev = json.load(f)
    ex, k = [], 0
    for article in dev['data']:
        for para in article['paragraphs']:
            for qa in para['qas']:
                if k % every == 0:
                    ex.append({'id': qa['id'], 'question': qa['question'], 'context': para['context']})
                k += 1
    return ex


def validation_features(tok, examples, T, stride):
    """run_qa.py prepare_validation_features (pad on the right)."""
    enc = tok([e['question'].lstrip() for e in examples], [e['context'] for e in examples],
              truncation='only_second', max_length=T, stride=stride, return_overflowing_tokens=True,
              return_offsets_mapping=True, padding='max_length')
    feats = []
    for i, sample in enumerate(enc['overflow_to_sample_mapping']):
        seq = enc.sequence_ids(i)
        offsets = [o if seq[k] == 1 else None for k, o in enumerate(enc['offset_mapping'][i])]
        feats.append({'example': sample, 'offset_mapping': offsets})
    return feats


def draw_logits(rng, feats, T):
    n = len(feats)
    start = rng.normal(0, 3, size=(n, T)).astype(np.float32)
    end = rng.normal(0, 3, size=(n, T)).astype(np.float32)
    example_kind = {}
    for i, f in enumerate(feats):
        kind = example_kind.setdefault(f['example'], rng.integers(0, 16))
        if rng.random() < 0.15:
            kind = rng.integers(0, 16)
        ctx = np.array([o is not None for o in f['offset_mapping']])
        if kind in (1, 2):  # ties: values on a 0.5 grid
            start[i] = np.round(start[i] * 2) / 2
            end[i] = np.round(end[i] * 2) / 2
        elif kind == 3:  # everything tied
            start[i] = 0
            end[i] = 0
        elif kind == 4:  # no valid span: the best tokens are question and padding
            start[i][~ctx] += 30
            end[i][~ctx] += 30
        elif kind == 5:  # every likely end before every likely start
            pos = np.arange(T, dtype=np.float32)
            start[i] = (pos / 8 + rng.normal(0, 0.01, T)).astype(np.float32)
            end[i] = (-pos / 8 + rng.normal(0, 0.01, T)).astype(np.float32)
        elif kind == 6:  # ties between the scores of different spans
            start[i] = np.round(start[i])
            end[i] = np.round(end[i])
    return start, end


def finish_nbest(preds, context):
    """utils_qa's last steps for one example's sorted n best: offsets become
    text, an 'empty' answer stands in when there is none, and each gets its
    softmax probability. Returns the scores, popped from preds."""
    for p in preds:
        o = p.pop('offsets')
        p['text'] = context[o[0]:o[1]]
    if len(preds) == 0 or (len(preds) == 1 and preds[0]['text'] == ''):
        preds.insert(0, {'text': 'empty', 'start_logit': 0.0, 'end_logit': 0.0, 'score': 0.0})
    scores = np.array([p.pop('score') for p in preds])
    exp_scores = np.exp(scores - np.max(scores))
    probs = exp_scores / exp_scores.sum()
    for prob, p in zip(probs, preds):
        p['probability'] = prob
    return scores


def nbest_to_json(preds):
    """The n best as utils_qa writes them: numpy floats become Python floats."""
    return [{k: (float(v) if isinstance(v, (np.float16, np.float32, np.float64)) else v)
             for k, v in p.items()} for p in preds]


def postprocess(examples, feats, start_logits, end_logits, argsort_kind):
    """utils_qa.postprocess_qa_predictions, version_2_with_negative=False."""
    per_example = collections.defaultdict(list)
    for i, f in enumerate(feats):
        per_example[f['example']].append(i)
    predictions, nbest_json, nbest_scores = collections.OrderedDict(), collections.OrderedDict(), {}
    for ei, ex in enumerate(examples):
        prelim = []
        for fi in per_example[ei]:
            sl, el = start_logits[fi], end_logits[fi]
            offsets = feats[fi]['offset_mapping']
            starts = np.argsort(sl, kind=argsort_kind)[-1:-N_BEST - 1:-1].tolist()
            ends = np.argsort(el, kind=argsort_kind)[-1:-N_BEST - 1:-1].tolist()
            for s in starts:
                for e in ends:
                    if s >= len(offsets) or e >= len(offsets) or offsets[s] is None or offsets[e] is None:
                        continue
                    if e < s or e - s + 1 > MAX_ANSWER_LENGTH:
                        continue
                    prelim.append({'offsets': (offsets[s][0], offsets[e][1]), 'score': sl[s] + el[e],
                                   'start_logit': sl[s], 'end_logit': el[e]})
        preds = sorted(prelim, key=lambda x: x['score'], reverse=True)[:N_BEST]
        scores = finish_nbest(preds, ex['context'])
        nbest_scores[ex['id']] = [float(s) for s in scores]
        predictions[ex['id']] = preds[0]['text']
        nbest_json[ex['id']] = nbest_to_json(preds)
    return predictions, nbest_json, nbest_scores


def pack_ids(b, examples):
    """The example ids, each as a u16 length and UTF-8 bytes."""
    for ex in examples:
        s = ex['id'].encode()
        b += struct.pack('<H', len(s)) + s


def pack_feature(b, f, T):
    """A feature's example index and its begin and end offsets (0xFFFF: none)."""
    ob = [o[0] if o is not None else 0xFFFF for o in f['offset_mapping']]
    oe = [o[1] if o is not None else 0xFFFF for o in f['offset_mapping']]
    assert max(x for x in ob + oe if x != 0xFFFF) < 0xFFFF
    b += struct.pack('<i', f['example']) + struct.pack('<%dH' % T, *ob) + struct.pack('<%dH' % T, *oe)


def pack_inputs(b, examples, feats, T, start, end):
    """The example ids, then each feature with its start and end logits (float32)."""
    pack_ids(b, examples)
    for i, f in enumerate(feats):
        pack_feature(b, f, T)
        b += start[i].astype('<f4').tobytes() + end[i].astype('<f4').tobytes()


def pack_nbest(b, nbest, scores):
    """An example's n best: score, logits, probability and the text's FNV-1a hash each."""
    for p, sc in zip(nbest, scores):
        b += struct.pack('<fffdQ', sc, p['start_logit'], p['end_logit'], p['probability'], fnv1a(p['text'].encode()))


def write_ref(path, examples, feats, T, start, end, preds, nbest, scores):
    b = bytearray(b'BQAPP001')
    b += struct.pack('<5I', len(examples), len(feats), T, N_BEST, MAX_ANSWER_LENGTH)
    pack_inputs(b, examples, feats, T, start, end)
    for ex in examples:
        s = preds[ex['id']].encode()
        b += struct.pack('<H', len(s)) + s + struct.pack('<H', len(nbest[ex['id']]))
        pack_nbest(b, nbest[ex['id']], scores[ex['id']])
    b += struct.pack('<Q', fnv1a((json.dumps(preds, indent=4, ensure_ascii=False) + '\n').encode()))
    b += struct.pack('<Q', fnv1a((json.dumps(nbest, indent=4, ensure_ascii=False) + '\n').encode()))
    with open(path, 'wb') as f:
        f.write(b)
    return len(b)


def uncased_tokenizer(data):
    """The bert-base-uncased fast tokenizer, from the vocabulary under data."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(data, 'vocab/bert-base-uncased-vocab.txt'), 'rb') as f:
            vocab = f.read()
        with open(os.path.join(d, 'vocab.txt'), 'wb') as f:
            f.write(vocab)
        with open(os.path.join(d, 'tokenizer_config.json'), 'w') as f:
            json.dump({'do_lower_case': True, 'tokenizer_class': 'BertTokenizer'}, f)
        tok = AutoTokenizer.from_pretrained(d)
    assert tok.is_fast
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default='../shared/data')
    ap.add_argument('--out', default='tests/ref/postprocess')
    ap.add_argument('--every', type=int, default=50)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    examples = load_slice(os.path.join(args.data, 'squad-v1.1/dev-v1.1.json'), args.every)
    tok = uncased_tokenizer(args.data)
    rng = np.random.default_rng(1234)
    for T, stride in ((384, 128), (128, 32)):
        feats = validation_features(tok, examples, T, stride)
        start, end = draw_logits(rng, feats, T)
        preds, nbest, scores = postprocess(examples, feats, start, end, 'stable')
        dpreds, dnbest, _ = postprocess(examples, feats, start, end, None)
        n_multi = sum(1 for c in collections.Counter(f['example'] for f in feats).values() if c > 1)
        n_empty = sum(1 for v in preds.values() if v == 'empty')
        diff_pred = sum(1 for k in preds if preds[k] != dpreds[k])
        diff_nbest = sum(1 for k in nbest if [p['text'] for p in nbest[k]] != [p['text'] for p in dnbest[k]])
        path = os.path.join(args.out, 'squad_T%d.bin' % T)
        size = write_ref(path, examples, feats, T, start, end, preds, nbest, scores)
        print('%s: %d examples, %d features (%d examples with several windows), %d "empty", %d bytes; '
              'default np.argsort on this CPU would change %d predictions and %d n-best lists'
              % (path, len(examples), len(feats), n_multi, n_empty, size, diff_pred, diff_nbest))


if __name__ == '__main__':
    main()
