# Sourced by tests/gpu/train_cli.sh and tests/cudaemu/train_cli.sh, which compare the same runs of
# the tiny reference model: a scratch folder $W (removed on exit), the model $M, the data $D, the
# failure count, and `train NAME DEVICE PRECISION [extra options]` (40 steps, dropout 0, no
# shuffle, into $W/NAME with its stdout and stderr in $W/NAME.out and $W/NAME.err).
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
M=tests/ref/train3/init
D=tests/data/train_small.json
fails=0
train() {
    local name=$1 dev=$2 prec=$3
    shift 3
    "$BERTC" train --model $M --train $D --out "$W/$name" --max-seq-length 64 --doc-stride 16 --batch 6 \
        --micro-batch 2 --max-steps 40 --lr 5e-3 --dropout 0 --no-shuffle --seed 42 --save-every 10 \
        --save-every-minutes 0 --monitor-interval 0.2 --log-every 10 --device "$dev" --precision "$prec" "$@" \
        >"$W/$name.out" 2>"$W/$name.err"
}
