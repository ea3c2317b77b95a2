#!/usr/bin/env bash
# The bad-input corpus (tests/bad/README.md): every case of every
# tests/bad/KIND/expected.txt runs bertc on a malformed input and requires
#   - the expected exit code (2),
#   - exactly one line on stderr, starting "bertc: " and holding the expected
#     substring (which names the file and the place),
#   - nothing on stdout,
#   - nothing left in the empty temp dir that {OUT} points into (no partial
#     --out, --dump or --cache output, no temp files),
#   - the input itself unchanged.
# A case after an "xfail: REASON" line is a known failure: it is run and
# reported (XFAIL, or XPASS once fixed) but does not fail the test.
source "$(dirname "$0")/lib/cli.sh"
root=tests/bad
good=$root/good
tmp=$cli_tmp
xfailed=0 xpassed=0

# Fingerprint of a file or a dir tree (names and bytes), or "absent".
fingerprint() {
    if [ -d "$1" ]; then (cd "$1" && find . -print0 | sort -z | xargs -0 cksum 2>&1) | cksum
    elif [ -e "$1" ]; then cksum <"$1"
    else echo absent; fi
}

subst() {
    local s=$1
    s=${s//\{FILE\}/$file}
    s=${s//\{STMODEL\}/$stmodel}
    s=${s//\{MODEL\}/$good/model}
    s=${s//\{VOCAB\}/$good/model/vocab.txt}
    s=${s//\{DATA\}/$good/data.json}
    s=${s//\{PRED\}/$good/pred.json}
    s=${s//\{OUT\}/$outdir/out}
    printf '%s' "$s"
}

for expected in "$root"/*/expected.txt; do
    kind=$(basename "$(dirname "$expected")")
    xfail=""
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in '' | '#'*) continue ;; esac
        if [ "${line#xfail:}" != "$line" ]; then
            xfail=${line#xfail:}
            continue
        fi
        cli_n=$((cli_n + 1))
        IFS='|' read -r name code want args <<<"$line"
        name=$(echo "$name" | xargs)
        code=$(echo "$code" | xargs)
        want=$(echo "$want" | sed 's/^ *//; s/ *$//')
        file=$root/$kind/$name
        outdir=$tmp/case$cli_n
        mkdir -p "$outdir"
        stmodel=$tmp/stmodel$cli_n
        if [ "$kind" = safetensors ]; then
            mkdir -p "$stmodel"
            cp "$good"/model/config.json "$good"/model/vocab.txt "$good"/model/tokenizer_config.json "$stmodel"/
            cp "$file" "$stmodel"/model.safetensors
        fi
        want=$(subst "$want")
        read -r -a argv <<<"$(subst "$args")"
        before=$(fingerprint "$file")
        "$BERTC" "${argv[@]}" </dev/null >"$tmp/out" 2>"$tmp/err"
        rc=$?
        problems=()
        [ "$rc" -eq "$code" ] || problems+=("exit $rc, want $code")
        [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ "$(tail -c 1 "$tmp/err" | od -An -tx1 | tr -d ' \n')" = 0a ] ||
            problems+=("stderr is $(wc -l <"$tmp/err") lines, want one")
        head -c 7 "$tmp/err" | grep -qF "bertc: " || problems+=("stderr does not start with 'bertc: '")
        grep -qF -- "$want" "$tmp/err" || problems+=("stderr lacks '$want'")
        [ -s "$tmp/out" ] && problems+=("stdout not empty: $(head -c 100 "$tmp/out")")
        left=$(ls -A "$outdir")
        [ -z "$left" ] && rmdir "$outdir" || problems+=("left behind in the output dir: $(echo "$left" | tr '\n' ' ')")
        [ "$(fingerprint "$file")" = "$before" ] || problems+=("the input was changed")
        rm -rf "$stmodel"
        echo "$kind/$name: bertc ${argv[*]} -> exit $rc: $(head -c 300 "$tmp/err" | tr '\n' '|')"
        if [ ${#problems[@]} -eq 0 ]; then
            if [ -n "$xfail" ]; then
                echo "  XPASS (was a known failure:$xfail): remove its xfail line from $expected"
                xpassed=$((xpassed + 1))
            fi
        elif [ -n "$xfail" ]; then
            echo "  XFAIL (known:$xfail): ${problems[*]}"
            xfailed=$((xfailed + 1))
        else
            cli_bad "$kind/$name: $(printf '%s; ' "${problems[@]}")"
        fi
        xfail=""
    done <"$expected"
done
echo "$xfailed known failures, $xpassed known failures now passing"
[ "$cli_n" -gt 0 ] || cli_bad "no cases in $root/*/expected.txt"
finish
