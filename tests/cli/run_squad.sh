#!/usr/bin/env bash
# bertc run_squad: run_squad.py's command line (absl flag forms, its checks
# and defaults) on a Google checkpoint: train + predict writes
# predictions.json and nbest_predictions.json in --output_dir; predict-only
# gives exactly what `bertc predict` gives on the same checkpoint; the
# optimizer settings of optimization.py reach the trainer; TPU flags are
# accepted with one note; SQuAD 2.0 writes null_odds.json and equals bertc
# predict --version-2-with-negative; bad command lines exit 2 with one line.
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
G=tests/bad/good/tf
D=tests/bad/good/data.json
base=(--vocab_file="$G/vocab.txt" --bert_config_file="$G/bert_config.json" --init_checkpoint="$G/bert_model.ckpt")
small=(--max_seq_length=32 --doc_stride=8 --max_query_length=8)

# The seed's shape of command, train and predict
cli_run run_squad "${base[@]}" --do_train=True --train_file="$D" --do_predict=True --predict_file="$D" \
    --train_batch_size=2 --learning_rate=3e-5 --num_train_epochs=2.0 "${small[@]}" --output_dir="$t/o" \
    --use_tpu=False --tpu_name=my-tpu --num_tpu_cores=8
cli_check '[ "$rc" -eq 0 ]'
for f in predictions.json nbest_predictions.json init_model/model.safetensors final/model.safetensors metrics.csv; do
    cli_check '[ -s "$t/o/$f" ]'
done
cli_check 'grep -qF "\"q1\":" "$t/o/predictions.json" && grep -qF "\"q2\":" "$t/o/predictions.json"'
cli_check 'grep -qF "\"probability\":" "$t/o/nbest_predictions.json"'
cli_check 'grep -qF "run_squad: ignoring --use_tpu, --tpu_name, --num_tpu_cores" "$t/out"'
cli_check 'grep -qF "AdamW lr 3e-05, warm-up 1 steps then linear decay, weight decay 0.01, eps 1e-06, clip 1" "$t/out"'
cli_check 'grep -qF "every 1000 steps, keep 5" "$t/out"'
cli_check '[ "$(grep -c . "$t/o/metrics.csv")" -eq 3 ]'   # header + 2 steps (2 windows, batch 2, 2 epochs)

# Predict only, flag forms: bare bool, --flag value, single dash, --nodo_train
cli_run run_squad "${base[@]}" --do_predict --nodo_train --predict_file "$D" --max_seq_length 32 -doc_stride=8 \
    --max_query_length=8 --predict_batch_size=1 --n_best_size=5 --output_dir="$t/p"
cli_check '[ "$rc" -eq 0 ] && [ ! -e "$t/p/final" ]'
"$BERTC" predict --model "$G" --data "$D" --out "$t/direct.json" --nbest "$t/direct_nbest.json" --max-seq-length 32 \
    --doc-stride 8 --max-query-length 8 --n-best 5 2>/dev/null
cli_check 'cmp -s "$t/p/predictions.json" "$t/direct.json" && cmp -s "$t/p/nbest_predictions.json" "$t/direct_nbest.json"'
cli_check 'grep -qF "\"do_lower_case\": true" "$t/p/init_model/tokenizer_config.json"'
cli_run run_squad "${base[@]}" --do_predict=1 --predict_file="$D" "${small[@]}" --do_lower_case=False --output_dir="$t/c"
cli_check '[ "$rc" -eq 0 ] && grep -qF "\"do_lower_case\": false" "$t/c/init_model/tokenizer_config.json"'
# No --init_checkpoint: a random model, as run_squad.py starts from
cli_run run_squad --vocab_file="$G/vocab.txt" --bert_config_file="$G/bert_config.json" --do_predict \
    --predict_file="$D" "${small[@]}" --output_dir="$t/r"
cli_check '[ "$rc" -eq 0 ] && grep -qF "initialised at random" "$t/out" && [ -s "$t/r/predictions.json" ]'

# SQuAD 2.0: trained with unanswerable windows at [CLS]; predictions, n-best and null_odds.json as
# run_squad.py writes them, the same as bertc predict --version-2-with-negative on the trained model
D2=tests/data/train_small_squad2.json
cli_run run_squad "${base[@]}" --do_train=True --train_file="$D2" --do_predict=True --predict_file="$D2" \
    --train_batch_size=2 --num_train_epochs=1.0 "${small[@]}" --version_2_with_negative=True \
    --null_score_diff_threshold=0.5 --output_dir="$t/v2"
cli_check '[ "$rc" -eq 0 ] && [ -s "$t/v2/null_odds.json" ] && grep -qF "squad 2.0" "$t/out"'
"$BERTC" predict --model "$t/v2/final" --data "$D2" --out "$t/v2direct.json" --null-odds "$t/v2odds.json" \
    --version-2-with-negative --null-score-diff-threshold 0.5 --max-seq-length 32 --doc-stride 8 \
    --max-query-length 8 --batch 8 2>/dev/null
cli_check 'cmp -s "$t/v2/predictions.json" "$t/v2direct.json" && cmp -s "$t/v2/null_odds.json" "$t/v2odds.json"'

# run_squad.py's checks and bertc's: exit 2, one line, starting "bertc: "
bad() { expect 2 "$1" -- run_squad "${@:2}"; }
bad "at least one of --do_train or --do_predict must be True" "${base[@]}" --output_dir="$t/x"
bad "flag --output_dir must be specified" "${base[@]}" --do_predict --predict_file="$D"
bad "if --do_train is True, then --train_file must be specified" "${base[@]}" --do_train --output_dir="$t/x"
bad "unknown flag --learning_rat" "${base[@]}" --do_predict --predict_file="$D" --learning_rat=1 --output_dir="$t/x"
bad "--do_train=yes: not a boolean" "${base[@]}" --do_train=yes --output_dir="$t/x"
bad "the max_seq_length (64) must be greater than max_query_length (64) + 3" "${base[@]}" --do_predict \
    --predict_file="$D" --max_seq_length=64 --output_dir="$t/x"
bad "cannot use sequence length 384 because the BERT model was only trained up to sequence length 64" "${base[@]}" \
    --do_predict --predict_file="$D" --output_dir="$t/x"
bad "--max_seq_length needs a value" "${base[@]}" --do_predict --predict_file="$D" --max_seq_length
bad "no $t/none.index" --vocab_file="$G/vocab.txt" --bert_config_file="$G/bert_config.json" \
    --init_checkpoint="$t/none" --do_predict --predict_file="$D" "${small[@]}" --output_dir="$t/x"
bad "checksum mismatch" --vocab_file="$G/vocab.txt" --bert_config_file="$G/bert_config.json" \
    --init_checkpoint=tests/bad/model/tf_bad_tensor_crc/bert_model.ckpt --do_predict --predict_file="$D" "${small[@]}" \
    --output_dir="$t/x"
cli_check '[ ! -e "$t/x" ]'
cli_run run_squad --help
cli_check '[ "$rc" -eq 0 ] && grep -qF -- "--null_score_diff_threshold" "$t/out" && grep -qF -- "--save_checkpoints_steps" "$t/out"'
finish
