#!/usr/bin/env bash
# bertc init --out FILE, where FILE exists and is not a directory: exit 2, the
# file untouched. And --out inside a file (a/b with a a file): exit 2 too.
source "$(dirname "$0")/lib/cli.sh"
V="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
F=$cli_tmp/file
echo "precious" >"$F"
expect 2 "bertc: --out $F: exists and is not a directory" -- init --config tiny --vocab "$V" --out "$F"
[ "$(cat "$F")" = precious ] || cli_bad "the file was changed"
expect 2 "$F" -- init --config tiny --vocab "$V" --out "$F/sub"
finish
