#!/usr/bin/env python3
"""SQuAD 2.0 test data and the reference numbers of the official SQuAD 2.0
evaluation (evaluate-v2.0.py, its functions reproduced below with the same
behaviour; the precision-recall plots are left out), under this Python (3.11:
sum() adds left to right; 3.12's compensated sum() can change the last
digits: sum_py312 below ports it, for the "py3.12" cases).

    python3 tools/squad2_eval_ref.py eval DATA.json PRED.json [-n NA.json] [-t 1.0]
        # prints what evaluate-v2.0.py prints
    python3 tools/squad2_eval_ref.py make [--data ../shared/data]

v2 data from SQuAD v1.1 dev (to_v2 below; tests/eval/test_eval_squad2.c applies the same
rule in C): questions are numbered 0, 1, ... in file order; question k with
k % 3 == 1 loses its answers ("answers": [], "is_impossible": true), the
others get "is_impossible": false.

`make` writes:
  tests/data/squad2_dev_slice.json   every 25th paragraph of that v2 dev (the features and
                                     post-processing tests use it too)
  tests/data/squad2_expected.json    evaluate-v2.0.py's printed output on the whole v2 dev with
                                     the predictions and no-answer files of PREDICTIONS below,
                                     for several options
  tests/data/squad2_hand_expected.json  the same for tests/data/squad2_hand_{data,pred,na}.json
  tests/data/train_small_squad2.json  tests/data/train_small.json (the CLI tests' tiny training
                                     file) made v2 by the same rule
"""
import argparse
import collections
import json
import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# evaluate-v2.0.py's normalize_answer and F1 arithmetic are evaluate-v1.1.py's.
from squad_eval_ref import eval_cli, normalize_answer, token_f1  # noqa: E402


# ---- evaluate-v2.0.py (the official script's functions, same behaviour) ----

def make_qid_to_has_ans(dataset):
    qid_to_has_ans = {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid_to_has_ans[qa['id']] = bool(qa['answers'])
    return qid_to_has_ans


def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    return token_f1(pred_toks, gold_toks)


def get_raw_scores(dataset, preds):
    exact_scores = {}
    f1_scores = {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid = qa['id']
                gold_answers = [a['text'] for a in qa['answers'] if normalize_answer(a['text'])]
                if not gold_answers:
                    # For unanswerable questions, only correct answer is empty string
                    gold_answers = ['']
                if qid not in preds:
                    print('Missing prediction for %s' % qid)
                    continue
                a_pred = preds[qid]
                # Take max over all gold answers
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    new_scores = {}
    for qid, s in scores.items():
        pred_na = na_probs[qid] > na_prob_thresh
        if pred_na:
            new_scores[qid] = float(not qid_to_has_ans[qid])
        else:
            new_scores[qid] = s
    return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    # SUM is the builtin sum(), or sum_py312 for the numbers of Python 3.12 and later
    if not qid_list:
        total = len(exact_scores)
        return collections.OrderedDict([
            ('exact', 100.0 * SUM(exact_scores.values()) / total),
            ('f1', 100.0 * SUM(f1_scores.values()) / total),
            ('total', total),
        ])
    else:
        total = len(qid_list)
        return collections.OrderedDict([
            ('exact', 100.0 * SUM(exact_scores[k] for k in qid_list) / total),
            ('f1', 100.0 * SUM(f1_scores[k] for k in qid_list) / total),
            ('total', total),
        ])


def sum_py312(values):
    """CPython 3.12's builtin sum() of ints and floats from the int 0, step
    by step (Python/bltinmodule.c builtin_sum_impl): ints add exactly until
    the first float; after it, floats are added with Neumaier's
    compensation and ints plainly; the compensation is added at the end.
    This Python is 3.11, so 3.12's numbers come from this port."""
    it = iter(values)
    i, f = 0, None
    for v in it:
        if isinstance(v, int):
            i += v
            continue
        f = i + v
        break
    if f is None:
        return i
    c = 0.0
    for v in it:
        if isinstance(v, float):
            t = f + v
            if abs(f) >= abs(v):
                c += (f - t) + v
            else:
                c += (v - t) + f
            f = t
        else:
            f += float(v)
    if c and math.isfinite(c):
        f += c
    return f


SUM = sum


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval['%s_%s' % (prefix, k)] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for i, qid in enumerate(qid_list):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            if preds[qid]:
                diff = -1
            else:
                diff = 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
    best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
    best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
    main_eval['best_exact'] = best_exact
    main_eval['best_exact_thresh'] = exact_thresh
    main_eval['best_f1'] = best_f1
    main_eval['best_f1_thresh'] = f1_thresh


def official_main(data_file, pred_file, na_prob_file=None, na_prob_thresh=1.0, out_file=None):
    """main() of evaluate-v2.0.py; returns what it prints (without the newline),
    or writes out_file (--out-file) and returns None."""
    with open(data_file) as f:
        dataset_json = json.load(f)
        dataset = dataset_json['data']
    with open(pred_file) as f:
        preds = json.load(f)
    if na_prob_file:
        with open(na_prob_file) as f:
            na_probs = json.load(f)
    else:
        na_probs = {k: 0.0 for k in preds}
    qid_to_has_ans = make_qid_to_has_ans(dataset)  # maps qid to True/False
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = get_raw_scores(dataset, preds)
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        has_ans_eval = make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids)
        merge_eval(out_eval, has_ans_eval, 'HasAns')
    if no_ans_qids:
        no_ans_eval = make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids)
        merge_eval(out_eval, no_ans_eval, 'NoAns')
    if na_prob_file:
        find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    if out_file:
        with open(out_file, 'w') as f:
            json.dump(out_eval, f)
        return None
    return json.dumps(out_eval, indent=2)


# ---- test data ----

def to_v2(dev):
    """Question k (file order) with k % 3 == 1 becomes unanswerable."""
    k = 0
    for art in dev['data']:
        for para in art['paragraphs']:
            for qa in para['qas']:
                if k % 3 == 1:
                    qa['answers'] = []
                    qa['is_impossible'] = True
                else:
                    qa['is_impossible'] = False
                k += 1
    dev['version'] = 'v2.0'
    return dev


def predictions(dev2, v1_preds):
    """The v1 test's perturbed predictions (tests/data/eval_squad_pred.json);
    a missing one is ""; unanswerable question k with k % 2 == 0 gets ""."""
    preds, k = {}, 0
    for art in dev2['data']:
        for para in art['paragraphs']:
            for qa in para['qas']:
                p = v1_preds.get(qa['id'], '')
                if not qa['answers'] and k % 2 == 0:
                    p = ''
                preds[qa['id']] = p
                k += 1
    return preds


def na_probs(dev2, preds):
    """Two ids that are not questions first, then question k: an int
    (k // 11) % 3 when k % 11 == 0, else (k * 7919) % 1000 / 1000.0 + e - 0.25
    where e is 1.5 when the prediction is "" and 0.0 otherwise (many ties,
    values above 1.0, a best threshold inside the range)."""
    na, k = {'not-a-question-1': 0.25, 'not-a-question-2': -3}, 0
    for art in dev2['data']:
        for para in art['paragraphs']:
            for qa in para['qas']:
                e = 1.5 if preds[qa['id']] == '' else 0.0
                na[qa['id']] = (k // 11) % 3 if k % 11 == 0 else (k * 7919) % 1000 / 1000.0 + e - 0.25
                k += 1
    return na


CASES = [  # (name, use the no-answer file, na_prob_thresh, sum() of Python 3.12)
    ('plain', False, 1.0, False),
    ('na', True, 1.0, False),
    ('na_t0.5', True, 0.5, False),
    ('t-1', False, -1.0, False),
    ('plain py3.12', False, 1.0, True),
    ('na_t0.5 py3.12', True, 0.5, True),
]


def run_cases(data_path, pred_path, na_path):
    """What the script prints for each case, and (key "CASE --out-file") what its --out-file holds."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        global SUM
        for name, use_na, t, py312 in CASES:
            SUM = sum_py312 if py312 else sum
            out[name] = official_main(data_path, pred_path, na_path if use_na else None, t)
            official_main(data_path, pred_path, na_path if use_na else None, t, os.path.join(d, 'o.json'))
            with open(os.path.join(d, 'o.json')) as f:
                out[name + ' --out-file'] = f.read()
        SUM = sum
    return out


def make(args):
    with open(os.path.join(args.data, 'squad-v1.1/dev-v1.1.json')) as f:
        dev2 = to_v2(json.load(f))
    with open(os.path.join(ROOT, 'tests/data/eval_squad_pred.json')) as f:
        v1_preds = json.load(f)
    out = os.path.join(ROOT, 'tests/data')
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ('dev2.json', 'pred.json', 'na.json')]
        preds = predictions(dev2, v1_preds)
        for p, obj in zip(paths, (dev2, preds, na_probs(dev2, preds))):
            with open(p, 'w') as f:
                json.dump(obj, f)
        expected = run_cases(*paths)
    with open(os.path.join(out, 'squad2_expected.json'), 'w') as f:
        json.dump(expected, f, indent=1)
        f.write('\n')
    hand = [os.path.join(out, 'squad2_hand_%s.json' % n) for n in ('data', 'pred', 'na')]
    with open(os.path.join(out, 'squad2_hand_expected.json'), 'w') as f:
        json.dump(run_cases(*hand), f, indent=1)
        f.write('\n')
    # the small training file of the CLI tests, made v2 by the same rule
    with open(os.path.join(out, 'train_small.json')) as f:
        small = to_v2(json.load(f))
    with open(os.path.join(out, 'train_small_squad2.json'), 'w') as f:
        json.dump(small, f, ensure_ascii=False, indent=1)
        f.write('\n')
    # the slice: every 25th paragraph
    sl, p = {'version': 'v2.0', 'data': []}, 0
    for art in dev2['data']:
        keep = []
        for para in art['paragraphs']:
            if p % 25 == 0:
                keep.append(para)
            p += 1
        if keep:
            sl['data'].append({'title': art['title'], 'paragraphs': keep})
    with open(os.path.join(out, 'squad2_dev_slice.json'), 'w') as f:
        json.dump(sl, f, ensure_ascii=False)
    nq = sum(len(pa['qas']) for a in sl['data'] for pa in a['paragraphs'])
    print('squad2_dev_slice.json: %d paragraphs, %d questions' % (sum(len(a['paragraphs']) for a in sl['data']), nq))
    for name, v in expected.items():
        print(name + ':', v.replace('\n', ''))


def main():
    ap, sub, e = eval_cli()
    e.add_argument('-n', '--na-prob-file')
    e.add_argument('-t', '--na-prob-thresh', type=float, default=1.0)
    e.add_argument('-o', '--out-file')
    e.add_argument('--py312-sum', action='store_true', help="the numbers of Python 3.12's sum()")
    m = sub.add_parser('make')
    m.add_argument('--data', default=os.path.join(ROOT, '..', 'shared', 'data'))
    args = ap.parse_args()
    if args.cmd == 'eval':
        global SUM
        SUM = sum_py312 if args.py312_sum else sum
        text = official_main(args.data, args.pred, args.na_prob_file, args.na_prob_thresh, args.out_file)
        if text is not None:
            print(text)
    else:
        make(args)


if __name__ == '__main__':
    sys.exit(main())
