#!/usr/bin/env bash
# bertc eval on bad usage and bad files: exit 2, one line on stderr that names
# the file and line:column (bad JSON) or the question id (a prediction that is
# not a string), nothing on stdout.
source "$(dirname "$0")/lib/cli.sh"
D=tests/data
expect 2 "no-such.json: No such file or directory" -- eval "$D/no-such.json" "$D/eval_hand_pred.json"
expect 2 "no-such.json: No such file or directory" -- eval "$D/eval_hand_data.json" "$D/no-such.json"
expect 2 "$D/eval_bad_pred_syntax.json:2:20: invalid JSON" -- eval "$D/eval_hand_data.json" "$D/eval_bad_pred_syntax.json"
expect 2 "$D/eval_bad_pred_type.json: the prediction for id 'q2' is not a string" -- eval "$D/eval_hand_data.json" "$D/eval_bad_pred_type.json"
printf '{"version": "1.1", "data": [\n  {"paragraphs": [}\n' >"$cli_tmp/bad_data.json"
expect 2 "$cli_tmp/bad_data.json:2:19: invalid JSON" -- eval "$cli_tmp/bad_data.json" "$D/eval_hand_pred.json"
printf '' >"$cli_tmp/empty.json"
expect 2 "$cli_tmp/empty.json:" -- eval "$D/eval_hand_data.json" "$cli_tmp/empty.json"
printf '["a", "b"]\n' >"$cli_tmp/list.json"
expect 2 "$cli_tmp/list.json: predictions must be a JSON object" -- eval "$D/eval_hand_data.json" "$cli_tmp/list.json"
printf '{"version": "1.1", "data": [{"paragraphs": [{"qas": [{"id": "q1"}]}]}]}\n' >"$cli_tmp/noanswers.json"
expect 2 "question 'q1': \"answers\" missing" -- eval "$cli_tmp/noanswers.json" "$D/eval_hand_pred.json"
expect 2 "not a SQuAD-format file" -- eval "$D/eval_hand_pred.json" "$D/eval_hand_pred.json"
expect 2 "$D: is a directory" -- eval "$D" "$D/eval_hand_pred.json"
expect 2 "expected DATA.json and PRED.json, got 1 file(s)" -- eval "$D/eval_hand_data.json"
expect 2 "expected DATA.json and PRED.json, got 3 file(s)" -- eval a b c
expect 2 "--metric must be squad or cmrc, not 'bleu'" -- eval "$D/eval_hand_data.json" "$D/eval_hand_pred.json" --metric bleu
expect 2 "unknown option '--nbest'" -- eval "$D/eval_hand_data.json" "$D/eval_hand_pred.json" --nbest 3
finish
