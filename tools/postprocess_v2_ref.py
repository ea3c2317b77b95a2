#!/usr/bin/env python3
"""Reference file for tests/infer/test_postprocess_squad2.c: SQuAD 2.0 post-processing.

Takes every 4th question of tests/data/squad2_dev_slice.json (SQuAD dev made
v2 by tools/squad2_eval_ref.py: a third of the questions have no answer),
builds run_qa.py's validation features with the bert-base-uncased fast
tokenizer at T=128, stride 32 (many examples with several windows), draws
logits as tools/postprocess_ref.py does (ties, rows without a valid span)
plus null-answer cases ([CLS] logits raised so the null answer wins, lowered
so it falls out of the n best and is added back, a score difference of
exactly float32(0.1) against a threshold of 0.1), and runs
postprocess_qa_predictions with version_2_with_negative=True as
transformers' examples/pytorch/question-answering/utils_qa.py writes it
(re-implemented below from reading that file: the examples' utils_qa.py is not
part of the transformers package), for several null_score_diff_threshold
values. np.argsort uses kind="stable" (see tools/postprocess_ref.py).

    python3 tools/postprocess_v2_ref.py [--data ../shared/data] [--out tests/ref/postprocess]

Binary layout (little-endian), squad2_T128.bin:
  8s magic "BQAPP2v1"; u32 n_examples, n_features, T, n_best, max_answer_length, n_thresholds
  f64 thresholds[n_thresholds]
  n_examples x (u16 len, id bytes)
  n_features x (i32 example, u16 offset_begin[T], u16 offset_end[T] (0xFFFF = None),
                f32 start_logits[T], f32 end_logits[T])
  n_examples x (u16 len, prediction bytes at thresholds[0], f64 score_diff, u16 n_nbest,
                n_nbest x (f32 score, f32 start_logit, f32 end_logit, f64 probability, u64 text_hash))
  n_thresholds x u64 hash of predictions.json at that threshold
  u64 hash of nbest_predictions.json, u64 hash of null_odds.json
JSON files as json.dumps(indent=4, ensure_ascii=False) + "\\n"; hashes are 64-bit FNV-1a.
"""
import argparse
import collections
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from postprocess_ref import (draw_logits, finish_nbest, fnv1a, load_slice, nbest_to_json, pack_inputs, pack_nbest,  # noqa: E402
                             uncased_tokenizer, validation_features)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_BEST = 20
MAX_ANSWER_LENGTH = 30
THRESHOLDS = [0.0, 0.1, -2.5, 3.0]


def null_cases(rng, feats, start, end, T):
    """[CLS] logits: raised (the null answer wins), lowered (it falls out of
    the n best), or the float32(0.1) case: one window, the best span's logits
    0 and 0 (everything else low), [CLS] start float32(0.1), end 0."""
    per_example = collections.defaultdict(list)
    for i, f in enumerate(feats):
        per_example[f['example']].append(i)
    n_tenth = 0
    for ex, fis in per_example.items():
        u = rng.random()
        if u < 0.25:
            for i in fis:
                start[i][0] += np.float32(6)
                end[i][0] += np.float32(6)
        elif u < 0.45:
            for i in fis:
                start[i][0] = np.float32(-40)
                end[i][0] = np.float32(-40)
        elif u < 0.5 and len(fis) == 1:
            i = fis[0]
            ctx = [k for k, o in enumerate(feats[i]['offset_mapping']) if o is not None]
            start[i][:] = np.float32(-5)
            end[i][:] = np.float32(-5)
            s = ctx[len(ctx) // 2]
            start[i][s] = np.float32(0)
            end[i][s] = np.float32(0)
            start[i][0] = np.float32(0.1)
            end[i][0] = np.float32(0)
            n_tenth += 1
    return n_tenth


def postprocess_v2(examples, feats, all_start_logits, all_end_logits, threshold, argsort_kind='stable'):
    """utils_qa.postprocess_qa_predictions, version_2_with_negative=True."""
    features_per_example = collections.defaultdict(list)
    for i, f in enumerate(feats):
        features_per_example[f['example']].append(i)
    all_predictions = collections.OrderedDict()
    all_nbest_json = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()
    nbest_scores = {}
    for example_index, example in enumerate(examples):
        feature_indices = features_per_example[example_index]
        min_null_prediction = None
        prelim_predictions = []
        for feature_index in feature_indices:
            start_logits = all_start_logits[feature_index]
            end_logits = all_end_logits[feature_index]
            offset_mapping = feats[feature_index]['offset_mapping']
            feature_null_score = start_logits[0] + end_logits[0]
            if min_null_prediction is None or min_null_prediction['score'] > feature_null_score:
                min_null_prediction = {'offsets': (0, 0), 'score': feature_null_score,
                                       'start_logit': start_logits[0], 'end_logit': end_logits[0]}
            start_indexes = np.argsort(start_logits, kind=argsort_kind)[-1:-N_BEST - 1:-1].tolist()
            end_indexes = np.argsort(end_logits, kind=argsort_kind)[-1:-N_BEST - 1:-1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (start_index >= len(offset_mapping) or end_index >= len(offset_mapping)
                            or offset_mapping[start_index] is None or len(offset_mapping[start_index]) < 2
                            or offset_mapping[end_index] is None or len(offset_mapping[end_index]) < 2):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > MAX_ANSWER_LENGTH:
                        continue
                    prelim_predictions.append({
                        'offsets': (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                        'score': start_logits[start_index] + end_logits[end_index],
                        'start_logit': start_logits[start_index],
                        'end_logit': end_logits[end_index]})
        if min_null_prediction is not None:
            prelim_predictions.append(min_null_prediction)
            null_score = min_null_prediction['score']
        predictions = sorted(prelim_predictions, key=lambda x: x['score'], reverse=True)[:N_BEST]
        if min_null_prediction is not None and not any(p['offsets'] == (0, 0) for p in predictions):
            predictions.append(min_null_prediction)
        scores = finish_nbest(predictions, example['context'])
        i = 0
        while predictions[i]['text'] == '':
            i += 1
        best_non_null_pred = predictions[i]
        score_diff = null_score - best_non_null_pred['start_logit'] - best_non_null_pred['end_logit']
        scores_diff_json[example['id']] = float(score_diff)
        if score_diff > threshold:
            all_predictions[example['id']] = ''
        else:
            all_predictions[example['id']] = best_non_null_pred['text']
        nbest_scores[example['id']] = [float(s) for s in scores]
        all_nbest_json[example['id']] = nbest_to_json(predictions)
    return all_predictions, all_nbest_json, scores_diff_json, nbest_scores


def dumps(obj):
    return (json.dumps(obj, indent=4, ensure_ascii=False) + '\n').encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default=os.path.join(ROOT, '..', 'shared', 'data'))
    ap.add_argument('--out', default=os.path.join(ROOT, 'tests', 'ref', 'postprocess'))
    ap.add_argument('--every', type=int, default=4)
    args = ap.parse_args()
    examples = load_slice(os.path.join(ROOT, 'tests/data/squad2_dev_slice.json'), args.every)
    tok = uncased_tokenizer(args.data)
    rng = np.random.default_rng(4321)
    T, stride = 128, 32
    feats = validation_features(tok, examples, T, stride)
    start, end = draw_logits(rng, feats, T)
    n_tenth = null_cases(rng, feats, start, end, T)
    runs = [postprocess_v2(examples, feats, start, end, t) for t in THRESHOLDS]
    preds, nbest, diffs, scores = runs[0]
    b = bytearray(b'BQAPP2v1')
    b += struct.pack('<6I', len(examples), len(feats), T, N_BEST, MAX_ANSWER_LENGTH, len(THRESHOLDS))
    b += struct.pack('<%dd' % len(THRESHOLDS), *THRESHOLDS)
    pack_inputs(b, examples, feats, T, start, end)
    for ex in examples:
        s = preds[ex['id']].encode()
        b += struct.pack('<H', len(s)) + s + struct.pack('<dH', diffs[ex['id']], len(nbest[ex['id']]))
        pack_nbest(b, nbest[ex['id']], scores[ex['id']])
    for r in runs:
        b += struct.pack('<Q', fnv1a(dumps(r[0])))
    b += struct.pack('<Q', fnv1a(dumps(nbest)))
    b += struct.pack('<Q', fnv1a(dumps(diffs)))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, 'squad2_T%d.bin' % T)
    with open(path, 'wb') as f:
        f.write(b)
    n_multi = sum(1 for c in collections.Counter(f['example'] for f in feats).values() if c > 1)
    n_null = [sum(1 for v in r[0].values() if v == '') for r in runs]
    n_empty = sum(1 for v in nbest.values() if v[0]['text'] == 'empty')
    n_back = sum(1 for v in nbest.values() if v[-1]['text'] == '' and len(v) > N_BEST)
    print('%s: %d examples, %d features (%d examples with several windows), %d bytes; null answer predicted at '
          'thresholds %s: %s; %d "empty"; null added back after the n best: %d; float32(0.1) cases: %d'
          % (path, len(examples), len(feats), n_multi, len(b), THRESHOLDS, n_null, n_empty, n_back, n_tenth))


if __name__ == '__main__':
    main()
