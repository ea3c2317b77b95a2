#!/usr/bin/env bash
# bertc tokenize on known lines: ids (and offsets) as BertTokenizerFast gives them (checked with
# transformers 5 / tokenizers 0.23 when written), line ends, empty lines, --cased, the chinese vocab.
source "$(dirname "$0")/lib/cli.sh"
tmp=$cli_tmp
uncased="$BERTC_DATA/vocab/bert-base-uncased-vocab.txt"
chinese="$BERTC_DATA/vocab/bert-base-chinese-vocab.txt"

tokens() { # NAME EXPECTED-FILE ARGS... (stdin: the input): exit 0 and exactly EXPECTED-FILE on stdout
    local name=$1 want=$2
    shift 2
    cli_n=$((cli_n + 1))
    "$BERTC" "$@" >"$tmp/got" 2>"$tmp/err"
    local rc=$?
    echo "case $cli_n: $name: bertc $* -> exit $rc"
    if [ "$rc" -ne 0 ] || ! cmp -s "$tmp/got" "$want"; then
        cli_bad "$name: exit $rc; got / want:"
        cat "$tmp/got" "$tmp/err"
        echo "--"
        cat "$want"
    fi
}

# CRLF line end, an empty line, a last line without a newline
printf 'Hello, World! caf\xc3\xa9 na\xc3\xafve\r\nThe quick [SEP] brown fox\n\n\xe5\x8c\x97\xe4\xba\xac\xe5\xa4\xa7\xe5\xad\xa6 \xc4\xb0stanbul' >"$tmp/in"
printf '7592 1010 2088 999 7668 15743\n1996 4248 102 2829 4419\n\n1781 1755 1810 1817 9960\n' >"$tmp/want"
tokens "uncased ids" "$tmp/want" tokenize --vocab "$uncased" <"$tmp/in"
printf '7592:0-5 1010:5-6 2088:7-12 999:12-13 7668:14-18 15743:19-24\n1996:0-3 4248:4-9 102:10-15 2829:16-21 4419:22-25\n\n1781:0-1 1755:1-2 1810:2-3 1817:3-4 9960:5-13\n' >"$tmp/want"
tokens "uncased offsets" "$tmp/want" tokenize --vocab "$uncased" --offsets <"$tmp/in"
printf 'Hello, World! caf\xc3\xa9 na\xc3\xafve\n' >"$tmp/in"
printf '100:0-5 1010:5-6 100:7-12 999:12-13 100:14-18 100:19-24\n' >"$tmp/want"
tokens "cased" "$tmp/want" tokenize --vocab "$uncased" --cased --offsets <"$tmp/in"
# 北京大学成立于1898年。Peking
printf '\xe5\x8c\x97\xe4\xba\xac\xe5\xa4\xa7\xe5\xad\xa6\xe6\x88\x90\xe7\xab\x8b\xe4\xba\x8e1898\xe5\xb9\xb4\xe3\x80\x82Peking\n' >"$tmp/in"
printf '1266 776 1920 2110 2768 4989 754 11459 2399 511 100\n' >"$tmp/want"
tokens "chinese" "$tmp/want" tokenize --vocab "$chinese" --cased <"$tmp/in"
: >"$tmp/want"
tokens "no input" "$tmp/want" tokenize --vocab "$uncased" </dev/null
finish
