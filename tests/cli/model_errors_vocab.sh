#!/usr/bin/env bash
# bertc init with a missing, empty or directory --vocab: exit 2, one line naming it.
source "$(dirname "$0")/lib/cli.sh"
t=$cli_tmp
: >"$t/empty.txt"
for v in "$t/missing.txt" "$t/empty.txt" "$t"; do
    expect 2 "$v" -- init --config tiny --vocab "$v" --out "$t/m"
    cli_absent "$t/m"
done
# A vocab without a final newline still counts its last line
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello' >"$t/v5.txt"
cli_run init --config tiny --vocab "$t/v5.txt" --out "$t/m"
cli_check '[ "$rc" -eq 0 ] && grep -qF "\"vocab_size\": 5" "$t/m/config.json"'
finish
