#!/usr/bin/env bash
# bertc init with a bad --config (an unknown name, a missing file) or bad
# options: exit 2, one line on stderr naming the problem, no dir written.
source "$(dirname "$0")/lib/cli.sh"
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
M=$cli_tmp/m
# refused 'STDERR SUBSTRING' ARGS...: bertc init ARGS exits 2 and writes no $M
refused() {
    expect 2 "$1" -- init "${@:2}"
    cli_absent "$M"
}
refused "--config huge: not a named config (tiny, mini, small, minilm, base, large)" --config huge --vocab "$V" --out "$M"
refused "--config $cli_tmp/none.json: not a named config" --config "$cli_tmp/none.json" --vocab "$V" --out "$M"
refused "missing required option --config" --vocab "$V" --out "$M"
refused "missing required option --vocab" --config tiny --out "$M"
refused "missing required option --out" --config tiny --vocab "$V"
refused "--seed" --config tiny --vocab "$V" --out "$M" --seed -1
refused "--seed" --config tiny --vocab "$V" --out "$M" --seed 12abc
refused "unknown option '--layers'" --config tiny --vocab "$V" --out "$M" --layers 3
refused "unexpected argument 'extra'" --config tiny --vocab "$V" --out "$M" extra
finish
