#!/usr/bin/env bash
# Google BERT dirs (TensorFlow checkpoints) wherever bertc takes --model, and
# bertc convert SRC DST: the Hugging Face dir it writes predicts exactly as
# the checkpoint does, and holds what transformers loads (config.json,
# model.safetensors, vocab.txt, tokenizer_config.json; tools/check_tf_convert.py
# loads it with transformers, outside ctest). Bad sources exit 2 and leave no DST.
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
G=tests/bad/good/tf
D=tests/bad/good/data.json

# --model GOOGLE_DIR on predict and features
cli_run predict --model "$G" --data "$D" --out "$t/p_tf.json" --max-seq-length 32 --doc-stride 8
cli_check '[ "$rc" -eq 0 ] && [ -s "$t/p_tf.json" ]'
cli_run features --model "$G" --data "$D" --dump "$t/feat_tf" --max-seq-length 32 --doc-stride 8
cli_check '[ "$rc" -eq 0 ]'

# convert, then the HF dir predicts byte-identically
cli_run convert "$G" "$t/hf"
cli_check '[ "$rc" -eq 0 ] && grep -qF "\"do_lower_case\": true" "$t/hf/tokenizer_config.json"'
for f in config.json model.safetensors vocab.txt tokenizer_config.json; do cli_check '[ -s "$t/hf/$f" ]'; done
cli_check 'cmp -s "$G/vocab.txt" "$t/hf/vocab.txt"'
cli_check 'grep -qF "\"model_type\": \"bert\"" "$t/hf/config.json" && grep -qF "\"hidden_size\": 8" "$t/hf/config.json"'
cli_check '! ls "$t/hf" | grep -q tmp'
cli_run predict --model "$t/hf" --data "$D" --out "$t/p_hf.json" --max-seq-length 32 --doc-stride 8
cli_check '[ "$rc" -eq 0 ] && cmp -s "$t/p_tf.json" "$t/p_hf.json"'
# the reference checkpoint (L2 H64) by its prefix, --cased
cli_run convert tests/ref/tf/google/bert_model.ckpt "$t/hf2" --cased
cli_check '[ "$rc" -eq 0 ] && grep -qF "\"do_lower_case\": false" "$t/hf2/tokenizer_config.json"'
# a `checkpoint` file picks one of several checkpoints
mkdir "$t/two"; cp "$G"/* "$t/two/"; cp "$G/bert_model.ckpt.index" "$t/two/model.ckpt-7.index"
cp "$G/bert_model.ckpt.data-00000-of-00001" "$t/two/model.ckpt-7.data-00000-of-00001"
printf 'model_checkpoint_path: "model.ckpt-7"\nall_model_checkpoint_paths: "model.ckpt-7"\n' >"$t/two/checkpoint"
cli_run convert "$t/two" "$t/hf3"
cli_check '[ "$rc" -eq 0 ] && grep -qF "model.ckpt-7 ->" "$t/out"'

# train --model GOOGLE_DIR: converted into RUN/init_model, then trained; a
# second run resumes (the conversion gives the same bytes: the fingerprint matches)
cli_run train --model "$G" --train "$D" --out "$t/run" --max-steps 2 --batch 2 --max-seq-length 32 --doc-stride 8 --save-every 1 --threads 1
cli_check '[ "$rc" -eq 0 ] && [ -s "$t/run/init_model/model.safetensors" ] && [ -s "$t/run/final/model.safetensors" ]'
cli_check 'cmp -s "$t/run/init_model/model.safetensors" "$t/hf/model.safetensors"'
cli_run train --model "$G" --train "$D" --out "$t/run" --max-steps 3 --batch 2 --max-seq-length 32 --doc-stride 8 --threads 1
cli_check '[ "$rc" -eq 2 ] && grep -qF -- "holds a run with --max-steps 2" "$t/err"'

# refusals: exit 2, one line, no DST
cli_run convert "$G" "$t/hf"
cli_check '[ "$rc" -eq 2 ] && grep -qF "already holds a model" "$t/err"'
cli_run convert "$G" "$t/hf" --force
cli_check '[ "$rc" -eq 0 ]'
cli_run convert tests/bad/model/tf_bad_tensor_crc "$t/bad"
cli_check '[ "$rc" -eq 2 ] && grep -qF "checksum mismatch" "$t/err" && [ ! -e "$t/bad" ] && [ "$(wc -l <"$t/err")" -eq 1 ]'
cli_run convert tests/bad/model/tf_shape_mismatch "$t/bad"
cli_check '[ "$rc" -eq 2 ] && grep -qF "disagrees with bert_config.json" "$t/err" && [ ! -e "$t/bad" ]'
cli_run convert "$t/hf" "$t/bad"
cli_check '[ "$rc" -eq 2 ] && grep -qF "already a Hugging Face model dir" "$t/err"'
cli_run convert "$t/nope" "$t/bad"
cli_check '[ "$rc" -eq 2 ] && grep -qF "neither a directory nor a checkpoint prefix" "$t/err"'
cli_run convert "$G"
cli_check '[ "$rc" -eq 2 ] && grep -qF "takes SRC and DST" "$t/err"'
cli_run convert "$G" "$t/bad" --cased --uncased
cli_check '[ "$rc" -eq 2 ] && [ ! -e "$t/bad" ]'
cli_run convert --help
cli_check '[ "$rc" -eq 0 ] && grep -qF "usage: bertc convert SRC DST" "$t/out"'
finish
