#!/usr/bin/env bash
# bertc init --config tiny with the uncased vocab: the files of a Hugging Face
# model dir, the config of DESIGN.md, deterministic bytes for a seed, refusal
# to overwrite a model without --force. (test_weights reloads such a dir with
# model_load; tools/check_export.py loads one with transformers.)
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
cli_run init --config tiny --vocab "$V" --out "$t/m"
cli_check '[ "$rc" -eq 0 ]'
cli_check 'grep -qF "L2 H128 A2 I512, vocab 30522, 4369666 parameters, seed 42" "$t/out"'
for f in config.json model.safetensors vocab.txt tokenizer_config.json; do cli_check '[ -s "$t/m/$f" ]'; done
cli_check 'cmp -s "$V" "$t/m/vocab.txt"'
for kv in '"vocab_size": 30522' '"hidden_size": 128' '"num_hidden_layers": 2' '"num_attention_heads": 2' \
          '"intermediate_size": 512' '"max_position_embeddings": 512' '"type_vocab_size": 2' '"hidden_act": "gelu"' \
          '"model_type": "bert"' '"BertForQuestionAnswering"' '"layer_norm_eps": 1e-12' '"pad_token_id": 0'; do
    grep -qF "$kv" "$t/m/config.json" || cli_bad "config.json lacks $kv"
done
cli_check 'grep -qF "\"do_lower_case\": true" "$t/m/tokenizer_config.json"'
# 4369666 F32 values after an 8-byte length and a header padded to 8 bytes
size=$(stat -c %s "$t/m/model.safetensors")
hlen=$(od -An -t u8 -N 8 "$t/m/model.safetensors" | tr -d ' ')
echo "model.safetensors: $size bytes, header $hlen bytes"
cli_check '[ $((hlen % 8)) -eq 0 ] && [ "$size" -eq $((8 + hlen + 4 * 4369666)) ]'
cli_check '! ls "$t/m" | grep -q tmp'
# A model is not overwritten without --force
cli_run init --config tiny --vocab "$V" --out "$t/m" --seed 1
cli_check '[ "$rc" -eq 2 ] && grep -qF "already holds a model" "$t/err"'
# The same seed gives the same bytes; through the config.json it wrote too
cli_run init --config "$t/m/config.json" --vocab "$V" --out "$t/m2"
cli_check 'cmp -s "$t/m/model.safetensors" "$t/m2/model.safetensors"'
cli_run init --config tiny --vocab "$V" --out "$t/m2" --seed 43 --force --cased
cli_check '[ "$rc" -eq 0 ] && ! cmp -s "$t/m/model.safetensors" "$t/m2/model.safetensors"'
cli_check 'grep -qF "\"do_lower_case\": false" "$t/m2/tokenizer_config.json"'
# An existing dir without a model is fine
mkdir "$t/m3"; echo notes >"$t/m3/README"
cli_run init --config tiny --vocab "$V" --out "$t/m3"
cli_check '[ "$rc" -eq 0 ] && [ -s "$t/m3/model.safetensors" ] && [ -s "$t/m3/README" ]'
finish
