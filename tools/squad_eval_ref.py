#!/usr/bin/env python3
"""Reference files for tests/eval/test_eval.c, made with the official SQuAD v1.1
evaluation logic (evaluate-v1.1.py, reproduced below unchanged in behaviour)
under this Python (3.11: Unicode 14.0).

    python3 tools/squad_eval_ref.py eval DATA.json PRED.json   # prints what evaluate-v1.1.py prints
    python3 tools/squad_eval_ref.py make [--data ../shared/data] [--out tests/data]

`make` writes, in tests/data/:
  eval_squad_pred.json      predictions for every SQuAD v1.1 dev question, perturbed from the gold
                            answers (truncated, extra words, random context spans, case, punctuation,
                            articles, Unicode whitespace and case) and some left unanswered
  eval_squad_expected.json  {"output": the line evaluate-v1.1.py prints for that file,
                             "cases": per-question [pred, golds, em, f1] for a slice of hard cases}
  eval_unicode.json         Python's str.lower() / isspace / re \\w / final-sigma classes over all
                            code points, and repr() of floats, to check the C ports one by one
  eval_cmrc_trial_pred.json, eval_xquad_zh_pred.json, eval_cmrc_expected.json
                            perturbed predictions for the CMRC 2018 trial set and XQuAD zh, scored by
                            a Python 3 port of cmrc2018_evaluate.py (below)
  eval_treebank.json        nltk's NLTKWordTokenizer on 3,000 strings of quotes, contractions, ...
The CMRC part needs nltk (pip install nltk; no nltk data is needed).
"""
import argparse
import collections
import json
import os
import random
import re
import string
import struct
import sys
import unicodedata
from collections import Counter


# ---- evaluate-v1.1.py (the official script's functions, same behaviour) ----

def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    return token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def token_f1(prediction_tokens, ground_truth_tokens):
    """f1_score's arithmetic on tokens (evaluate-v2.0.py's compute_f1 shares it)."""
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def evaluate(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article['paragraphs']:
            for qa in paragraph['qas']:
                total += 1
                if qa['id'] not in predictions:
                    print('Unanswered question ' + qa['id'] + ' will receive score 0.', file=sys.stderr)
                    continue
                ground_truths = [x['text'] for x in qa['answers']]
                prediction = predictions[qa['id']]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {'exact_match': exact_match, 'f1': f1}


def official_main(data_path, pred_path):
    with open(data_path) as f:
        dataset_json = json.load(f)
        if dataset_json['version'] != '1.1':
            print('Evaluation expects v-1.1, but got dataset with v-' + dataset_json['version'], file=sys.stderr)
        dataset = dataset_json['data']
    with open(pred_path) as f:
        predictions = json.load(f)
    return json.dumps(evaluate(dataset, predictions))


# ---- perturbed predictions ----

TRICKS = ['\u00a0', '\u3000', '\u2009', '\u202f', '\u200b', '\ufeff', '\u0085', '\x1c']


def perturb(rng, gold, context):
    kind = rng.randrange(14)
    words = gold.split()
    if kind == 0:
        return gold
    if kind == 1 and len(words) > 1:  # truncated
        return ' '.join(words[:rng.randrange(1, len(words))])
    if kind == 2 and len(words) > 1:
        return ' '.join(words[rng.randrange(1, len(words)):])
    if kind == 3:  # extra words from the context around it
        i = context.find(gold)
        if i >= 0:
            a = max(0, i - rng.randrange(0, 40))
            b = min(len(context), i + len(gold) + rng.randrange(0, 40))
            return context[a:b]
    if kind == 4:  # a random span of the context
        a = rng.randrange(len(context))
        return context[a:a + rng.randrange(1, 60)]
    if kind == 5:
        return gold.upper()
    if kind == 6:
        return rng.choice(['the ', 'The ', 'a ', 'An ', '']) + gold + rng.choice(['.', ',', '!', '', ' the', "'s"])
    if kind == 7:  # Unicode whitespace between words
        return rng.choice(TRICKS).join(words)
    if kind == 8:
        return ''.join(ch for ch in gold if ch not in string.punctuation)
    if kind == 9:
        return gold + ' ' + gold
    if kind == 10:
        return ''
    if kind == 11:  # accented and other-script words next to articles
        return rng.choice(['the\u00e9 ', 'thé ', 'Ⅰthe ', 'the_', '\u0130the ', 'ΣΑΣ the ', 'the\u0301 ']) + gold
    if kind == 12 and len(gold) > 2:
        k = rng.randrange(1, len(gold))
        return gold[:k] + rng.choice(['-', '\u2013', '\u00a0', ' ', '']) + gold[k:]
    return gold.lower()


def make(args):
    with open(os.path.join(args.data, 'squad-v1.1/dev-v1.1.json')) as f:
        dev = json.load(f)
    rng = random.Random(20240611)
    preds = {}
    cases = []
    for article in dev['data']:
        for para in article['paragraphs']:
            for qa in para['qas']:
                if rng.random() < 0.02:
                    continue  # unanswered
                gold = [a['text'] for a in qa['answers']]
                p = perturb(rng, rng.choice(gold), para['context'])
                preds[qa['id']] = p
                if len(cases) < 1500 and (rng.random() < 0.12 or any(ord(c) > 127 for c in p)):
                    em = metric_max_over_ground_truths(exact_match_score, p, gold)
                    f1 = metric_max_over_ground_truths(f1_score, p, gold)
                    cases.append([p, gold, int(em), float(f1)])
    # hand-picked Unicode cases: Python's lower, split and \b do the work here
    extra = [
        ('İstanbul', ['i̇stanbul']), ('ΟΔΟΣ', ['οδος']), ('ΟΔΟΣ', ['οδοσ']), ('ΑΣ.Σ', ['ασ.ς']),
        ('the\u00e9 cat', ['theé cat']), ('théâtre the end', ['théâtre end']), ('a\u0301 b', ['\u0301 b']),
        ('x\u3000the\u00a0y', ['x y']), ('x\u200by', ['x y']), ('x\u200by', ['x\u200by']),
        ('Ⅻthe', ['ⅻthe']), ('the2 the_ the-', ['the2 the_']), ('ǅ', ['ǆ']), ('ẞ', ['ß']), ('K', ['k']),
        ('', ['']), ('the', ['']), ('', ['a']), ('an', ['the']), ('Σ', ['σ']),
    ]
    for p, gold in extra:
        cases.append([p, gold, int(metric_max_over_ground_truths(exact_match_score, p, gold)),
                      float(metric_max_over_ground_truths(f1_score, p, gold))])
    pred_path = os.path.join(args.out, 'eval_squad_pred.json')
    with open(pred_path, 'w') as f:
        json.dump(preds, f, ensure_ascii=False, indent=0)
        f.write('\n')
    output = official_main(os.path.join(args.data, 'squad-v1.1/dev-v1.1.json'), pred_path)
    with open(os.path.join(args.out, 'eval_squad_expected.json'), 'w') as f:
        json.dump({'output': output, 'answered': len(preds), 'cases': cases}, f, ensure_ascii=False, indent=0)
        f.write('\n')
    print('eval_squad_pred.json: %d predictions; evaluate-v1.1.py prints %s; %d cases' % (len(preds), output, len(cases)))
    make_unicode(args, rng)


def ranges(pred):
    out, start = [], None
    for c in range(0x110001):
        ok = c < 0x110000 and not (0xD800 <= c < 0xE000) and pred(c)
        if ok and start is None:
            start = c
        elif not ok and start is not None:
            out.append([start, c - 1])
            start = None
    return out


def sigma_class(c):
    ch = chr(c)
    if ('AΣ' + ch).lower()[1] == 'σ':
        return 2  # cased, not case-ignorable
    return 1 if ('A' + ch + 'Σ').lower()[-1] == 'ς' else 0  # 1: case-ignorable


def make_unicode(args, rng):
    word = re.compile(r'\w')
    lower = [[c, [ord(x) for x in chr(c).lower()]] for c in range(0x110000)
             if not (0xD800 <= c < 0xE000) and chr(c).lower() != chr(c)]
    floats = [0.0, -0.0, 100.0, 1e16, 1e15, 1234567890123456.0, 1e-4, 1e-5, 0.1, 1 / 3, 2 / 3, 5e-324,
              1.7976931348623157e308, 2.0 ** -1074 * 3, 2.0 ** 60, 2.0 ** -20, 9007199254740993.0, 123.456]
    for n in (10570, 1002, 1190, 7, 3):
        floats += [100.0 * k / n for k in range(0, n + 1, max(1, n // 300))]
    floats += [rng.uniform(0, 100) for _ in range(400)]
    floats += [struct.unpack('<d', struct.pack('<Q', rng.getrandbits(64)))[0] for _ in range(400)]
    floats += [2.0 ** e for e in range(-1074, 1024, 7)]
    floats = [x for x in floats if x == x and abs(x) != float('inf')]
    classes = [sigma_class(c) if not (0xD800 <= c < 0xE000) else 0 for c in range(0x110000)]
    runs = []  # run-length [class, count]
    for k in classes:
        if runs and runs[-1][0] == k:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    doc = {
        'unidata_version': unicodedata.unidata_version,
        'lower': lower,
        'space': ranges(lambda c: chr(c).isspace()),
        'word': ranges(lambda c: word.match(chr(c)) is not None),
        'sigma_class_runs': runs,
        'float_repr': [[struct.pack('<d', x).hex(), repr(x)] for x in floats],
    }
    with open(os.path.join(args.out, 'eval_unicode.json'), 'w') as f:
        json.dump(doc, f, separators=(',', ':'))
        f.write('\n')
    print('eval_unicode.json: %d lower mappings, %d word ranges, %d sigma runs, %d floats' % (
        len(lower), len(doc['word']), len(runs), len(floats)))


# ---- cmrc2018_evaluate.py ("v5 - special"), ported to Python 3 ----
# nltk.word_tokenize needs the punkt model, which cannot be downloaded here;
# NLTKWordTokenizer is the word tokenizer it runs on each sentence, and the
# short answer strings are one sentence. Python 2's unicode.lower() is the
# simple per-character mapping.

CMRC_SP = ['-', ':', '_', '*', '^', '/', '\\', '~', '`', '+', '=', '，', '。', '：', '？', '！', '“', '”', '；', '’',
           '《', '》', '……', '·', '、', '「', '」', '（', '）', '－', '～', '『', '』']


def py2_lower_strip(s):
    return ''.join(c.lower() if len(c.lower()) == 1 else c for c in s).strip()


def mixed_segmentation(in_str, rm_punc=False):
    from nltk.tokenize import NLTKWordTokenizer
    tok = NLTKWordTokenizer()
    in_str = py2_lower_strip(in_str)
    segs_out, temp_str = [], ''
    for char in in_str:
        if rm_punc and char in CMRC_SP:
            continue
        if re.search('[\u4e00-\u9fa5]', char) or char in CMRC_SP:
            if temp_str != '':
                segs_out.extend(tok.tokenize(temp_str))
                temp_str = ''
            segs_out.append(char)
        else:
            temp_str += char
    if temp_str != '':
        segs_out.extend(tok.tokenize(temp_str))
    return segs_out


def remove_punctuation(in_str):
    return ''.join(c for c in py2_lower_strip(in_str) if c not in CMRC_SP)


def find_lcs(s1, s2):
    m = [[0 for i in range(len(s2) + 1)] for j in range(len(s1) + 1)]
    mmax = p = 0
    for i in range(len(s1)):
        for j in range(len(s2)):
            if s1[i] == s2[j]:
                m[i + 1][j + 1] = m[i][j] + 1
                if m[i + 1][j + 1] > mmax:
                    mmax = m[i + 1][j + 1]
                    p = i + 1
    return s1[p - mmax:p], mmax


def calc_f1_score(answers, prediction):
    f1_scores = []
    for ans in answers:
        ans_segs = mixed_segmentation(ans, rm_punc=True)
        prediction_segs = mixed_segmentation(prediction, rm_punc=True)
        lcs, lcs_len = find_lcs(ans_segs, prediction_segs)
        if lcs_len == 0:
            f1_scores.append(0)
            continue
        precision = 1.0 * lcs_len / len(prediction_segs)
        recall = 1.0 * lcs_len / len(ans_segs)
        f1_scores.append((2 * precision * recall) / (precision + recall))
    return max(f1_scores)


def calc_em_score(answers, prediction):
    for ans in answers:
        if remove_punctuation(ans) == remove_punctuation(prediction):
            return 1
    return 0


def cmrc_evaluate(dataset, predictions):
    f1 = em = total = 0
    for article in dataset['data']:
        for para in article['paragraphs']:
            for qa in para['qas']:
                total += 1
                qid = qa['id'].strip()
                if qid not in predictions:
                    continue
                answers = [x['text'] for x in qa['answers']]
                f1 += calc_f1_score(answers, predictions[qid])
                em += calc_em_score(answers, predictions[qid])
    return json.dumps({'exact_match': 100.0 * em / total, 'f1': 100.0 * f1 / total})


CMRC_EXTRA = ['', ' ', '(', ')', '%', ',', '.', '...', '!', '?', ';', ' and ', "'s", '"', 'A.B.', ' 1,000', '，', '。',
              '……', '·', '-', 'dna', 'U.S.', ' e.g. ', '”', '“', '（', '）']


def cmrc_perturb(rng, gold, context):
    kind = rng.randrange(9)
    if kind == 0:
        return gold
    if kind == 1 and len(gold) > 1:
        a = rng.randrange(len(gold))
        return gold[a:a + rng.randrange(1, len(gold))]
    if kind == 2:
        i = context.find(gold)
        if i >= 0:
            return context[max(0, i - rng.randrange(0, 10)):i + len(gold) + rng.randrange(0, 10)]
    if kind == 3:
        a = rng.randrange(len(context))
        return context[a:a + rng.randrange(1, 30)]
    if kind == 4:
        k = rng.randrange(len(gold) + 1)
        return gold[:k] + rng.choice(CMRC_EXTRA) + gold[k:]
    if kind == 5:
        return rng.choice(CMRC_EXTRA) + gold + rng.choice(CMRC_EXTRA)
    if kind == 6:
        return gold.upper()
    if kind == 7:
        return ''.join(rng.choice(CMRC_EXTRA) if rng.random() < 0.2 else c for c in gold)
    return gold + gold

TREEBANK_PIECES = ['a', 'dna', 'U.S.', 'e.g.', "don't", "it's", "'s", "'", "''", '"', '``', '`', '.', '..', '...', ',',
                   ':', ';', '!', '?', '(', ')', '[', ']', '{', '}', '<', '>', '%', '$', '&', '#', '@', '*', '--', '-',
                   '1,000', '3.5', '1990', "can't", 'cannot', 'gonna', 'wanna ', "'tis", " 'twas", "we'll", "I'M",
                   "they've", "o'clock", "'hello'", '«', '»', '“', '”', '‘', '’', '„', '\u2013', '\u2014', ' ', '  ',
                   '\u00a0', '\u3000', 'é', 'ß', '\u0661', "d'ye", "more'n", 'gimme', 'lemme', 'gotta', 'x']


def make_treebank(args, rng):
    from nltk.tokenize import NLTKWordTokenizer
    tok = NLTKWordTokenizer()
    cases = []
    for _ in range(3000):
        t = ''.join(rng.choice(TREEBANK_PIECES) for _ in range(rng.randrange(1, 8)))
        cases.append([t, tok.tokenize(t)])
    with open(os.path.join(args.out, 'eval_treebank.json'), 'w') as f:
        json.dump(cases, f, ensure_ascii=False, separators=(',', ':'))
        f.write('\n')
    print('eval_treebank.json: %d strings tokenised by nltk %s NLTKWordTokenizer' % (len(cases), __import__('nltk').__version__))


def make_cmrc(args):
    """eval_cmrc_pred.json / eval_cmrc_expected.json: perturbed predictions
    for the CMRC 2018 trial set and XQuAD zh, scored by the port above."""
    rng = random.Random(777)
    out = {}
    for name, rel in (('cmrc_trial', 'cmrc2018/cmrc2018_trial.json'), ('xquad_zh', 'xquad/xquad.zh.json')):
        with open(os.path.join(args.data, rel)) as f:
            data = json.load(f)
        preds, cases = {}, []
        for article in data['data']:
            for para in article['paragraphs']:
                for qa in para['qas']:
                    if rng.random() < 0.02:
                        continue
                    gold = [a['text'] for a in qa['answers']]
                    p = cmrc_perturb(rng, rng.choice(gold), para['context'])
                    preds[qa['id'].strip()] = p
                    if rng.random() < 0.3:
                        cases.append([p, gold, calc_em_score(gold, p), float(calc_f1_score(gold, p))])
        with open(os.path.join(args.out, 'eval_%s_pred.json' % name), 'w') as f:
            json.dump(preds, f, ensure_ascii=False, indent=0)
            f.write('\n')
        out[name] = {'data': rel, 'output': cmrc_evaluate(data, preds), 'answered': len(preds), 'cases': cases}
        print('%s: %d predictions, cmrc2018_evaluate prints (as JSON) %s; %d cases' % (name, len(preds), out[name]['output'], len(cases)))
    with open(os.path.join(args.out, 'eval_cmrc_expected.json'), 'w') as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write('\n')
    make_treebank(args, rng)


def eval_cli():
    """The parser with an 'eval DATA PRED' subcommand (both reference scripts take it)."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest='cmd', required=True)
    e = sub.add_parser('eval')
    e.add_argument('data')
    e.add_argument('pred')
    return ap, sub, e


def main():
    ap, sub, e = eval_cli()
    m = sub.add_parser('make')
    m.add_argument('--data', default='../shared/data')
    m.add_argument('--out', default='tests/data')
    args = ap.parse_args()
    if args.cmd == 'eval':
        print(official_main(args.data, args.pred))
    else:
        os.makedirs(args.out, exist_ok=True)
        make(args)
        make_cmrc(args)


if __name__ == '__main__':
    main()
