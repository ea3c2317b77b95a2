#!/usr/bin/env bash
# bertc tokenize bad usage and bad vocab files: exit 2, one line on stderr naming the problem
# (and the file), nothing on stdout.
source "$(dirname "$0")/lib/cli.sh"
tmp=$cli_tmp
printf 'some text\n' >"$tmp/in"
cli_stdin=$tmp/in
expect 2 "$tmp/missing/vocab.txt: No such file" -- tokenize --vocab "$tmp/missing/vocab.txt"
expect 2 "missing required option --vocab" -- tokenize
expect 2 "unknown option '--lower'" -- tokenize --vocab "$tmp/v.txt" --lower
expect 2 "unexpected argument 'extra'" -- tokenize --vocab "$tmp/v.txt" extra
: >"$tmp/empty.txt"
expect 2 "$tmp/empty.txt: empty vocabulary file" -- tokenize --vocab "$tmp/empty.txt"
printf '[PAD]\n[UNK]\n[CLS]\n' >"$tmp/nosep.txt"
expect 2 "$tmp/nosep.txt: no [SEP] token" -- tokenize --vocab "$tmp/nosep.txt"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[UNK]\n' >"$tmp/dup.txt"
expect 2 "$tmp/dup.txt:5: duplicate token '[UNK]' (also on line 2)" -- tokenize --vocab "$tmp/dup.txt"
printf '[PAD]\n[UNK]\n\xff\n' >"$tmp/bad.txt"
expect 2 "$tmp/bad.txt:3: invalid UTF-8" -- tokenize --vocab "$tmp/bad.txt"
expect 2 "is a directory" -- tokenize --vocab "$tmp"
finish
