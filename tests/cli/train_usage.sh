#!/usr/bin/env bash
# bertc train: --help, and each bad option or input with its exit code and
# one-line message (as data: expected code, expected text, arguments).
source "$(dirname "$0")/lib/cli.sh"
M=tests/ref/train3/init
D=tests/data/train_small.json
O=$cli_tmp/run
S="--max-seq-length 64 --doc-stride 16"
expect_help train "usage: bertc train --model DIR --train FILE --out RUN" --model --train --out --dev --max-seq-length \
    --doc-stride --max-query-length --epochs --max-steps --batch --micro-batch --lr --warmup --weight-decay --adam-eps \
    --clip --dropout --seed --no-shuffle --precision --recompute --save-every --save-every-minutes --keep --resume \
    --eval-every --threads --log-every
expect 2 "unknown option '--bogus'"                 -- train --model $M --train $D --out $O --bogus 1
expect 2 "unknown option '-x'"                      -- train -x
expect 2 "option '--lr' needs a value"              -- train --model $M --train $D --out $O --lr
expect 2 "train --lr: 'abc' is not a finite number" -- train --model $M --train $D --out $O --lr abc
expect 2 "train --lr: 'nan' is not a finite number" -- train --model $M --train $D --out $O --lr nan
expect 2 "train --batch: 0 is out of range"         -- train --model $M --train $D --out $O --batch 0
expect 2 "train --batch: 3000000000 is out of range" -- train --model $M --train $D --out $O --batch 3000000000
expect 2 "train --epochs: -1 is out of range"       -- train --model $M --train $D --out $O --epochs -1
expect 2 "train --epochs: '1e999' is not a finite number" -- train --model $M --train $D --out $O --epochs 1e999
expect 2 "train --max-steps: '99999999999999999999' is not an integer in range" -- train --model $M --train $D --out $O --max-steps 99999999999999999999
expect 2 "train --seed: '4x' is not an integer"     -- train --model $M --train $D --out $O --seed 4x
expect 2 "train --micro-batch: 'big' is not an integer" -- train --model $M --train $D --out $O --micro-batch big
expect 2 "--micro-batch 8 is larger than --batch 4" -- train --model $M --train $D --out $O --micro-batch 8 --batch 4
expect 2 "--doc-stride 384 must be below --max-seq-length 384" -- train --model $M --train $D --out $O --doc-stride 384
expect 2 "--doc-stride 64 must be below --max-seq-length 32" -- train --model $M --train $D --out $O --max-seq-length 32 --doc-stride 64
expect 2 "--precision fp16 needs the CUDA backend"   -- train --model $M --train $D --out $O --precision fp16 --device cpu $S
expect 2 "--precision: 'fp8' is not one of"          -- train --model $M --train $D --out $O --precision fp8
expect 2 "--recompute: 'all' is not one of"          -- train --model $M --train $D --out $O --recompute all
expect 2 "missing required option --model"          -- train --train $D --out $O
expect 2 "missing required option --train"          -- train --model $M --out $O
expect 2 "missing required option --out"            -- train --model $M --train $D
expect 2 "unexpected argument 'extra'"              -- train --model $M --train $D --out $O extra
expect 2 "$cli_tmp/nomodel: no such model dir"      -- train --model $cli_tmp/nomodel --train $D --out $O
expect 2 "$cli_tmp/missing.json"                    -- train --model $M --train $cli_tmp/missing.json --out $O $S
expect 2 "$cli_tmp: is a directory"                 -- train --model $M --train $cli_tmp --out $O $S
printf '{"data": [\n  {"title": "x",, }\n]}\n' >"$cli_tmp/bad.json"
expect 2 "$cli_tmp/bad.json:2:"                     -- train --model $M --train $cli_tmp/bad.json --out $O $S
echo "not a dir" >"$cli_tmp/file"
expect 2 "--out $cli_tmp/file: exists and is not a directory" -- train --model $M --train $D --out $cli_tmp/file $S
[ "$(cat "$cli_tmp/file")" = "not a dir" ] || cli_bad "--out file was changed"
expect 2 "--resume $cli_tmp/nock: not a checkpoint dir" -- train --model $M --train $D --out $O --resume $cli_tmp/nock $S
# A window longer than the model: its max_position_embeddings, one warning (as run_qa.py).
expect 0 "--max-seq-length 128 is larger than the model's max_position_embeddings 64" -- train --model $M --train $D --out $cli_tmp/fit --max-seq-length 128 --doc-stride 32 --max-steps 2 --batch 2
grep -q "max_seq_length=64" "$cli_tmp/fit/info.csv" || cli_bad "info.csv does not say max_seq_length=64"
expect 2 "--doc-stride 100 must be below the window length 64" -- train --model $M --train $D --out $O --max-seq-length 128 --doc-stride 100
finish
