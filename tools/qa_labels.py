"""run_qa.py's labelling of training windows (prepare_train_features), shared by
tools/train_reference.py and bench/accuracy/minilm_squad_hf.py: for each window of a fast
tokenizer's encoding (return_overflowing_tokens, return_offsets_mapping), the
token positions of the first answer's start and end, or the [CLS] position when
the window does not hold the whole answer (or there is no answer)."""


def label_windows(tok, enc, answers):
    starts, ends = [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ids = enc["input_ids"][i]
        cls = ids.index(tok.cls_token_id)
        seq = enc.sequence_ids(i)
        ans = answers[enc["overflow_to_sample_mapping"][i]]
        if len(ans) == 0:
            starts.append(cls)
            ends.append(cls)
            continue
        sc = ans[0]["answer_start"]
        ec = sc + len(ans[0]["text"])
        ts = 0
        while seq[ts] != 1:
            ts += 1
        te = len(ids) - 1
        while seq[te] != 1:
            te -= 1
        if not (offsets[ts][0] <= sc and offsets[te][1] >= ec):
            starts.append(cls)
            ends.append(cls)
            continue
        while ts < len(offsets) and offsets[ts][0] <= sc:
            ts += 1
        starts.append(ts - 1)
        while offsets[te][1] >= ec:
            te -= 1
        ends.append(te + 1)
    return starts, ends
