#!/usr/bin/env bash
# Bad config.json files given to bertc: exit 2 and one line naming the file
# and the field (or line:column for malformed JSON). Nothing is written.
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
bad_config() { # NAME 'JSON' 'EXPECTED STDERR SUBSTRING'
    printf '%s' "$2" >"$t/$1.json"
    expect 2 "$3" -- init --config "$t/$1.json" --vocab "$V" --out "$t/m"
    grep -qF -- "$t/$1.json" "$cli_tmp/err" || cli_bad "$1: message does not name the file"
    cli_absent "$t/m"
}
bad_config relu '{"hidden_act": "relu"}' 'field hidden_act: "relu" is not supported'
bad_config heads '{"hidden_size": 100, "num_attention_heads": 12}' 'field num_attention_heads: 12 does not divide hidden_size 100'
bad_config negative '{"num_hidden_layers": -2}' 'field num_hidden_layers: -2 is out of range'
bad_config type '{"hidden_size": "768"}' 'field hidden_size: expected an integer, got a string'
bad_config relpos '{"position_embedding_type": "relative_key_query"}' 'field position_embedding_type'
bad_config broken $'{\n  "hidden_size": 128,\n  "num_hidden_layers" 2\n}' ':3:'
# A model dir as --config takes its config.json
mkdir "$t/dir"
printf '{"hidden_act": "tanh"}' >"$t/dir/config.json"
expect 2 "$t/dir/config.json: field hidden_act: \"tanh\"" -- init --config "$t/dir" --vocab "$V" --out "$t/m"
finish
