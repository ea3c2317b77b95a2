#!/usr/bin/env bash
# Full disk. The run dir lives on a small tmpfs, mounted in a
# private mount namespace (unshare -m as root, unshare -rm otherwise), that a
# filler file leaves nearly full; where no namespace can mount one, the
# trainer runs under RLIMIT_FSIZE instead (prlimit, SIGXFSZ ignored, so a
# write past the limit fails with EFBIG like a full disk's ENOSPC).
#
# A tiny run of 24 steps (checkpoints every 4) is killed after step 10,
# leaving checkpoints 4 and 8; copies of it are resumed:
#  1. with 3 MB free (a checkpoint needs 5.7 MB): the save at step 12 fails;
#     it must be reported, leave checkpoint 8 intact and no step-12 files,
#     and training must go on; then the space is freed and a later save
#     must succeed; the run ends with exit 0 and a final model byte-identical
#     to an uninterrupted run's.
#  2. with 1 MB free (the exported model.safetensors needs 1.9 MB): every
#     save and the final export fail; the run must end with exit 1 and an
#     error about the export and the space, keep checkpoints 4 and 8
#     unchanged and leave no final/ and no temporary dirs; run again with
#     the space back, it must finish with the same final model.
# R_FULLDISK_MODE=fsize forces the RLIMIT_FSIZE way (to test the test).
if [ -z "${R_IN_NS:-}" ] && [ "${R_FULLDISK_MODE:-}" != fsize ] && command -v unshare >/dev/null; then
    for u in "unshare -m" "unshare -rm"; do
        if $u sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d" && rmdir "$d"' 2>/dev/null; then
            R_IN_NS=1 exec $u bash "$0" "$@"
        fi
    done
fi
source "$(dirname "$0")/../reliability/lib.sh"

TOTAL=24
OPTS=(--max-steps "$TOTAL" --save-every 4 --save-every-minutes 0 --keep 2)
disk="$r_tmp/disk"
mkdir -p "$disk"
MODE=fsize
if [ -n "${R_IN_NS:-}" ] && mount -t tmpfs -o size=24m tmpfs "$disk" 2>/dev/null; then
    MODE=tmpfs
    trap 'umount "$disk" 2>/dev/null; rm -rf "$r_tmp"' EXIT
fi
echo "mode: $MODE"
LIMIT=unlimited
# fill BYTES: leave about BYTES writable (free space, or the largest file).
fill() {
    if [ "$MODE" = tmpfs ]; then
        local avail
        avail=$(df -B1 --output=avail "$disk" | tail -1)
        fallocate -l $((avail - $1)) "$disk/filler" || dd if=/dev/zero of="$disk/filler" bs=1 count=0 seek=$((avail - $1)) 2>/dev/null
        echo "filled $disk: $(df -B1 --output=avail "$disk" | tail -1) bytes free"
    else
        LIMIT=$1
        echo "RLIMIT_FSIZE $LIMIT bytes"
    fi
}
# unfill [PID]: give the space back (to the running PID too, in fsize mode).
unfill() {
    if [ "$MODE" = tmpfs ]; then
        rm -f "$disk/filler"
    else
        LIMIT=unlimited
        [ -n "${1:-}" ] && prlimit --pid "$1" --fsize=unlimited 2>/dev/null
    fi
}
# The bertc train command line of run dir $1 under the current limit.
limited_cmd() {
    r_cmd "$@"
    [ "$MODE" = fsize ] && R_CMD=(prlimit --fsize="$LIMIT" -- "${R_CMD[@]}")
}
trap '' XFSZ # inherited: a write past RLIMIT_FSIZE fails instead of killing
NOSPACE='No space left on device\|File too large'

r_make_model "$r_tmp/model"
r_train "$r_tmp/ref" "${OPTS[@]}" >"$r_tmp/ref.out" 2>"$r_tmp/ref.err" ||
    { cat "$r_tmp/ref.err"; r_bad "the uninterrupted run failed"; finish; }
BERTC_DEBUG_KILL=step:10 r_train "$r_tmp/base" "${OPTS[@]}" >"$r_tmp/base.out" 2>"$r_tmp/base.err"
[ "$(r_ckpt_steps "$r_tmp/base" | tr '\n' ' ')" = "4 8 " ] ||
    { cat "$r_tmp/base.err"; r_bad "could not make the base run (checkpoints 4 and 8)"; finish; }
r_sums "$r_tmp/base/checkpoints" >"$r_tmp/ck.base"

# ---- 1. a save fails, training goes on, a later save succeeds ----
run="$disk/run1"
cp -a "$r_tmp/base" "$run"
fill 3000000
limited_cmd "$run" "${OPTS[@]}"
"${R_CMD[@]}" >"$r_tmp/out1" 2>"$r_tmp/err1" &
pid=$!
seen=0
for ((i = 0; i < 3000; i++)); do
    if grep -q "$NOSPACE" "$r_tmp/err1"; then
        kill -STOP "$pid" 2>/dev/null
        seen=1
        break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
done
if [ "$seen" -eq 1 ]; then
    echo "save failure reported; run stopped (SIGSTOP) at step $(r_rows "$run") while the state is checked:"
    sed 's/^/    stderr: /' "$r_tmp/err1"
    r_sums "$run/checkpoints" >"$r_tmp/ck.now"
    r_check "1: checkpoints 4 and 8 intact, no step-12 files after the failed save" cmp -s "$r_tmp/ck.base" "$r_tmp/ck.now"
    unfill "$pid"
    kill -CONT "$pid" 2>/dev/null
fi
wait "$pid"
rc=$?
unfill
echo "1: exit $rc"
sed 's/^/    stderr: /' "$r_tmp/err1" | tail -5
r_check "1: the failed save was reported (no space)" [ "$seen" -eq 1 ]
r_check "1: it was the save of step 12" grep -q "step.0*12\|step 12" "$r_tmp/err1"
r_check "1: training went on: exit 0" [ "$rc" -eq 0 ]
r_check "1: metrics.csv reaches step $TOTAL" bash -c "tail -1 '$run/metrics.csv' | grep -q '^$TOTAL,'"
r_check "1: a later save succeeded (checkpoints now: $(r_ckpt_steps "$run" | tr '\n' ' '))" [ "$(r_newest "$run")" -gt 12 ]
r_check "1: final model identical to the uninterrupted run's" \
    cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
rm -rf "$run"

# ---- 2. no room for any save or the export ----
run="$disk/run2"
cp -a "$r_tmp/base" "$run"
fill 1000000
limited_cmd "$run" "${OPTS[@]}"
"${R_CMD[@]}" >"$r_tmp/out2" 2>"$r_tmp/err2"
rc=$?
unfill
echo "2: exit $rc"
sed 's/^/    stderr: /' "$r_tmp/err2" | tail -8
r_check "2: exit 1" [ "$rc" -eq 1 ]
r_check "2: the error names the export and the lack of space" \
    bash -c "tail -1 '$r_tmp/err2' | grep -q 'final' && tail -1 '$r_tmp/err2' | grep -q '$NOSPACE'"
r_check "2: metrics.csv reaches step $TOTAL (training went on)" bash -c "tail -1 '$run/metrics.csv' | grep -q '^$TOTAL,'"
r_sums "$run/checkpoints" >"$r_tmp/ck.now"
r_check "2: checkpoints 4 and 8 unchanged" cmp -s "$r_tmp/ck.base" "$r_tmp/ck.now"
left=$(cd "$run" && find . -name '*.tmp' -o -name '*.tmp.*' -o -name final | head -5 | tr '\n' ' ')
r_check "2: no final/ and no temporary files: ${left:-none}" [ -z "$left" ]
r_train "$run" "${OPTS[@]}" >"$r_tmp/out3" 2>"$r_tmp/err3"
rc=$?
echo "2: again with the space back: exit $rc; $(grep -m1 '^  resume ' "$r_tmp/out3")"
r_check "2: the rerun resumes from step 8 and ends with exit 0" \
    bash -c "[ $rc -eq 0 ] && grep -q 'resume    from .*step-00000008' '$r_tmp/out3'"
r_check "2: final model identical to the uninterrupted run's" \
    cmp -s "$r_tmp/ref/final/model.safetensors" "$run/final/model.safetensors"
finish
