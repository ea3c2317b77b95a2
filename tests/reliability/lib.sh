# Shared by tests/cli/reliability_*.sh and the other training cases that
# source it (after tests/cli/lib/cli.sh, which it sources: the temp dir
# r_tmp is its cli_tmp, the checks count as its cases): a tiny model and
# data set, the training options every case uses, counted checks, a seeded
# pseudo-random sequence and checkpoint helpers.
#
# The data (tiny_train.json: 12 questions on 3 short paragraphs) and its
# vocabulary (tiny_vocab.txt: the 92 word pieces it needs) keep the model at
# 0.47M parameters, so a checkpoint is 5.7 MB and a step takes ~30 ms on one
# core: a test can afford dozens of runs.
source "$(dirname "${BASH_SOURCE[0]}")/../cli/lib/cli.sh"
R_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R_TRAIN="$R_DIR/tiny_train.json"
r_tmp=$cli_tmp
# One core, a fixed thread count (results are bit-identical only with the
# same count), no monitor thread, no progress lines.
R_OPTS=(--max-seq-length 64 --doc-stride 32 --batch 4 --threads 1 --monitor-interval 0 --log-every 1000000)
r_sanitized() { [ "${BERTC_SANITIZED:-0}" = 1 ]; }

r_ok() { cli_n=$((cli_n + 1)); echo "ok: $*"; }
r_bad() { cli_n=$((cli_n + 1)); cli_bad "$*"; }
# r_check WHAT CMD...: runs CMD; counts and prints the outcome.
r_check() {
    local what=$1
    shift
    if "$@"; then r_ok "$what"; else r_bad "$what"; fi
}

# The tiny model dir, made once per test: r_make_model DIR
r_make_model() {
    "$BERTC" init --config tiny --vocab "$R_DIR/tiny_vocab.txt" --out "$1" --seed 7 >"$r_tmp/init.out" 2>&1 ||
        { cat "$r_tmp/init.out"; echo "FAIL: bertc init"; exit 1; }
    R_MODEL=$1
}

# r_train RUN [options...]: bertc train on the tiny data into RUN. To run
# it in the background, use "${R_CMD[@]}" after r_cmd RUN [options...], so
# that $! is bertc itself, not a subshell a kill would leave it behind.
r_cmd() {
    local run=$1
    shift
    R_CMD=("$BERTC" train --model "$R_MODEL" --train "$R_TRAIN" --out "$run" "${R_OPTS[@]}" "$@")
}
r_train() {
    r_cmd "$@"
    "${R_CMD[@]}"
}

# r_killed_every_attempt N [options...]: case 2 of the --supervise tests: every attempt killed
# (SIGKILL, BERTC_DEBUG_KILL=step:6, no checkpoint) under --supervise N into run=$r_tmp/run2 (stderr
# in $r_tmp/err2, exit code in rc): it exits 137 after N + 1 attempts.
r_killed_every_attempt() {
    local n=$1
    shift
    run="$r_tmp/run2"
    BERTC_DEBUG_KILL=step:6 r_train "$run" "$@" --supervise "$n" >"$r_tmp/out2" 2>"$r_tmp/err2"
    rc=$?
    echo "2: exit $rc"
    grep 'supervise' "$r_tmp/err2" | sed 's/^/    stderr: /'
    r_check "2: exit 137" [ "$rc" -eq 137 ]
    r_check "2: $((n + 1)) attempts" [ "$(grep -c 'BERTC_DEBUG_KILL: killing myself' "$r_tmp/err2")" -eq $((n + 1)) ]
}

# Deterministic pseudo-random numbers (a 31-bit LCG): r_rand sets R.
R_SEED=20240501
r_rand() {
    R_SEED=$(((R_SEED * 1103515245 + 12345) % 2147483648))
    R=$((R_SEED / 65536))
}

# Steps of the complete checkpoint dirs of RUN, ascending, one a line.
r_ckpt_steps() {
    local d
    for d in "$1"/checkpoints/step-*; do
        [ -d "$d" ] || continue
        case "$d" in *.tmp) continue ;; esac
        d=${d##*/step-}
        echo $((10#$d))
    done | sort -n
}
# Newest checkpoint step of RUN (0 when none).
r_newest() {
    local s
    s=$(r_ckpt_steps "$1" | tail -1)
    echo "${s:-0}"
}
r_ckpt_dir() { printf '%s/checkpoints/step-%08d' "$1" "$2"; }

# A listing with the checksum of every file under DIR (to prove nothing changed).
r_sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r cksum); }

# Rows of metrics.csv without the columns that measure time (examples_per_s,
# elapsed_s), which differ between any two runs.
r_metrics() { cut -d, -f1-6 "$1/metrics.csv"; }

# r_flip FILE OFFSET MASK: XORs one byte of FILE with MASK (1..255), in place.
r_flip() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $(((b ^ $3) & 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# r_size FILE
r_size() { stat -c %s "$1"; }
# Steps logged in RUN/metrics.csv (0 when there is none yet).
r_rows() {
    local n=1
    [ -f "$1/metrics.csv" ] && n=$(wc -l 2>/dev/null <"$1/metrics.csv")
    echo $((n > 0 ? n - 1 : 0))
}
r_rows_gt() { [ "$(r_rows "$1")" -gt "$2" ]; }
# r_wait_for CMD...: polls CMD every 10 ms for up to 60 s.
r_wait_for() {
    local i
    for ((i = 0; i < 6000; i++)); do
        "$@" && return 0
        sleep 0.01
    done
    return 1
}
# r_alive PID: the process runs (an exited child not yet reaped does not).
r_alive() {
    local s
    read -r _ _ s _ 2>/dev/null <"/proc/$1/stat" || return 1
    [ "$s" != Z ] && [ "$s" != X ]
}
# r_ended_or_rows_gt PID RUN N: PID has ended, or RUN logged more than N steps.
r_ended_or_rows_gt() { ! r_alive "$1" || r_rows_gt "$2" "$3"; }
