# Pipeline model parallelism (bertc train --pipeline-stages) under mpirun,
# tiny models, 1 thread per rank. A pipeline computes what one process
# computes: the same ops on the same numbers, each stage accumulating its
# gradients over the micro-batches in the same order, the same dropout
# masks; only the global norm's sum of squares is added in another order
# (per stage, then over the stages), which can move the clipping factor in
# its last bit about once in 10^8 steps. So the cases below require the
# loss column and the final weights byte for byte:
#  - 2 stages against 1 process (batch 8 = 4 micro-batches of 2, dropout,
#    clipping active), and two 2-stage runs against each other;
#  - 3 stages of a 4-layer model split by hand (0,1,3,4), packed
#    (--packing varlen), --recompute layer, against 1 process; the
#    default split of that model (the middle stage takes 2 layers: the
#    embeddings and the head cost FLOPs) by bertc plan and bertc train;
#  - 2 stages x 2 data-parallel copies (4 ranks) against 2 data-parallel
#    ranks (the same sums in the same order);
#  - loss scaling (BERTC_DEBUG_LOSS_SCALE) and non-finite steps skipped on
#    every stage (BERTC_DEBUG_NONFINITE), against 1 process;
#  - --dev evaluated (rank 0 gathers the stages): eval.csv and
#    predictions.json as 1 process's;
#  - stage 1 SIGKILLed after step 23, then the same command: resumes from
#    step 20 and ends byte-identical; the killed run resumed by 1 process
#    (with a note) ends byte-identical to 1 process; a 1-process checkpoint
#    resumed by 2 stages too;
#  - stage 1 out of memory at step 15: every rank ends with one line naming
#    the stage, and the same command again resumes and ends byte-identical;
#  - bad input: a stage without a layer, ranks that the stages do not
#    divide, more stages than layers, a split of the wrong length,
#    --shard-optimizer with stages: exit 2 on every rank, one line each,
#    nothing written; --pipeline-stages
#    without mpirun, --pipeline-split alone: exit 2; --help names both.
source "$(dirname "$0")/lib/cli.sh"
source "$(dirname "$0")/lib/mpi.sh"
expect_help train "usage: bertc train" --pipeline-stages --pipeline-split
mpi_require
T=$cli_tmp
M2=tests/ref/train3/init # 2 layers
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 4/' "$M2/config.json" >"$T/cfg4.json"
"$BERTC" init --config "$T/cfg4.json" --vocab "$M2/vocab.txt" --out "$T/m4" --seed 3 >/dev/null || cli_bad "init m4"
COMMON=(--train tests/data/train_small.json --max-seq-length 64 --doc-stride 16 --micro-batch 2 --batch 8 --lr 1e-3
        --max-steps 30 --save-every 10 --save-every-minutes 0 --monitor-interval 0 --log-every 1000 --threads 1)

on_rank() { # on_rank RANK VAR=VALUE RUN: 2 stages of M2 with VAR set on rank RANK alone, at most 300 s; RUN.log
    local rank=$1 var=$2 run=$3
    MPI_TIMEOUT=300 mpi_run 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = "$0" ]; then export "$1"; fi; shift; exec "$@"' \
        "$rank" "$var" "$BERTC" train "${COMMON[@]}" --model "$M2" --out "$run" --pipeline-stages 2 >"$run.log" 2>&1
}
identical() { # identical A B [STEPS]: final model, and the loss, lr and grad-norm columns, byte for byte
    cli_n=$((cli_n + 1))
    local steps=${3:-30}
    echo "case $cli_n: $(basename "$2") against $(basename "$1"): $(($(wc -l <"$2/metrics.csv") - 1)) steps, last" \
        "losses $(tail -1 "$1/metrics.csv" | cut -d, -f3) and $(tail -1 "$2/metrics.csv" | cut -d, -f3)"
    [ "$(($(wc -l <"$2/metrics.csv") - 1))" -eq "$steps" ] || cli_bad "not $steps steps"
    cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" || cli_bad "final models differ"
    cmp -s <(cut -d, -f3-5 "$1/metrics.csv") <(cut -d, -f3-5 "$2/metrics.csv") || cli_bad "losses/lr/grad norms differ"
}

echo "2 stages against 1 process"
train1 "$T/one" --model "$M2" || cli_bad "one failed: $(tail -3 "$T/one.log")"
trainN 2 "$T/pipe" --model "$M2" --pipeline-stages 2 || cli_bad "pipe failed: $(tail -5 "$T/pipe.log")"
grep -aq "pipeline  2 stages (MPI), layers 0-0 | 1-1" "$T/pipe.log" || cli_bad "the start-up report does not name the stages"
grep -q "^pipeline_layers,0-0 | 1-1$" "$T/pipe/info.csv" || cli_bad "info.csv lacks pipeline_layers"
grep -q "^pipeline_idle_s,[0-9.]* [0-9.]*$" "$T/pipe/info.csv" || cli_bad "info.csv lacks both stages' idle times"
grep -q '"pipeline_stages": 2' "$T/pipe/checkpoints/step-00000030/state.json" || cli_bad "state.json lacks the stages"
awk -F, 'NR > 1 && $5 > 1 { n++ } END { exit !(n > 0) }' "$T/one/metrics.csv" || cli_bad "no step was clipped"
identical "$T/one" "$T/pipe"
trainN 2 "$T/pipeb" --model "$M2" --pipeline-stages 2 || cli_bad "pipeb failed"
identical "$T/pipe" "$T/pipeb"

echo "3 stages of 4 layers split 0,1,3,4, packed, recompute, against 1 process"
P=(--model "$T/m4" --packing varlen --recompute layer)
train1 "$T/one4" "${P[@]}" || cli_bad "one4 failed: $(tail -3 "$T/one4.log")"
trainN 3 "$T/pipe4" "${P[@]}" --pipeline-stages 3 --pipeline-split 0,1,3,4 || cli_bad "pipe4 failed: $(tail -5 "$T/pipe4.log")"
grep -q "^pipeline_layers,0-0 | 1-2 | 3-3$" "$T/pipe4/info.csv" || cli_bad "the split is not 0-0 | 1-2 | 3-3"
identical "$T/one4" "$T/pipe4"
echo "the default split of 4 layers in 3 stages: bertc plan's and bertc train's"
cli_n=$((cli_n + 1))
"$BERTC" plan --model "$T/m4" --seq 64 --batch 2 --pipeline-stages 3 >"$T/plan4.txt" 2>&1 || cli_bad "plan failed: $(cat "$T/plan4.txt")"
trainN 3 "$T/pipe4d" --model "$T/m4" --pipeline-stages 3 --max-steps 2 || cli_bad "pipe4d failed: $(tail -5 "$T/pipe4d.log")"
echo "case $cli_n: $(grep "^split: " "$T/plan4.txt" | cut -c1-60)...; train: $(grep "^pipeline_layers," "$T/pipe4d/info.csv")"
grep -q "^split: 0,1,3,4 (bertc train --pipeline-stages 3's default at micro-batch 2" "$T/plan4.txt" || cli_bad "plan's split is not 0,1,3,4"
grep -q "^pipeline_layers,0-0 | 1-2 | 3-3$" "$T/pipe4d/info.csv" || cli_bad "train's default split is not 0-0 | 1-2 | 3-3"

echo "2 stages x 2 data-parallel copies against 2 data-parallel ranks"
trainN 2 "$T/dp2" --model "$M2" || cli_bad "dp2 failed: $(tail -5 "$T/dp2.log")"
trainN 4 "$T/p2d2" --model "$M2" --pipeline-stages 2 || cli_bad "p2d2 failed: $(tail -5 "$T/p2d2.log")"
grep -aq "2 stages (MPI) x 2 data-parallel copies" "$T/p2d2.log" || cli_bad "the report does not name the copies"
identical "$T/dp2" "$T/p2d2"

echo "loss scaling and non-finite steps 4-5 (skipped on every stage) against 1 process"
export BERTC_DEBUG_LOSS_SCALE=1 BERTC_DEBUG_NONFINITE=4:2
train1 "$T/onels" --model "$M2" || cli_bad "onels failed"
trainN 2 "$T/pipels" --model "$M2" --pipeline-stages 2 || cli_bad "pipels failed: $(tail -5 "$T/pipels.log")"
unset BERTC_DEBUG_LOSS_SCALE BERTC_DEBUG_NONFINITE
cli_n=$((cli_n + 1))
echo "case $cli_n: loss scales $(cut -d, -f6 "$T/pipels/metrics.csv" | sed -n '2p;5p;7p' | tr '\n' ' ')," \
    "skipped_steps $(grep skipped_steps "$T/pipels/info.csv")"
grep -q "^skipped_steps,2$" "$T/pipels/info.csv" || cli_bad "not 2 skipped steps"
[ "$(cut -d, -f6 "$T/pipels/metrics.csv" | sed -n 7p)" = 16384 ] || cli_bad "the scale was not halved twice"
identical "$T/onels" "$T/pipels"

echo "--dev evaluated by the pipeline (rank 0 with the gathered weights) against 1 process"
EV=(--model "$M2" --dev tests/data/train_small.json --eval-every 10 --max-steps 20)
train1 "$T/ev1" "${EV[@]}" || cli_bad "ev1 failed: $(tail -3 "$T/ev1.log")"
trainN 2 "$T/evp" "${EV[@]}" --pipeline-stages 2 || cli_bad "evp failed: $(tail -5 "$T/evp.log")"
evals_equal "$T/ev1" "$T/evp" "2 stages"

echo "stage 1 killed after step 23, then the same command again"
K=$T/kill
cli_n=$((cli_n + 1))
on_rank 1 BERTC_DEBUG_KILL=step:23 "$K"
killed_checks $? "$K" "rank 0 of 2 (pipeline stage 0 of 2): got a signal"
cp -r "$K" "$T/kill_one"
trainN 2 "$K" --model "$M2" --pipeline-stages 2 || cli_bad "the resumed run failed: $(tail -5 "$K.log")"
grep -aq "resume    from .*step-00000020" "$K.log" || cli_bad "did not resume from step 20"
identical "$T/pipe" "$K"
echo "the killed pipeline run resumed by 1 process"
train1 "$T/kill_one" --model "$M2" || cli_bad "resume with 1 process failed: $(tail -3 "$T/kill_one.log")"
cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep "resuming a run of" "$T/kill_one.log")"
grep -q "resuming a run of 2 pipeline stages with 1 (the same arithmetic" "$T/kill_one.log" || cli_bad "no note"
identical "$T/one" "$T/kill_one"
echo "a 1-process checkpoint resumed by 2 stages"
cp -r "$T/one" "$T/one_pipe"
rm -rf "$T/one_pipe/final" "$T/one_pipe/checkpoints/step-00000030"
trainN 2 "$T/one_pipe" --model "$M2" --pipeline-stages 2 || cli_bad "resume with 2 stages failed: $(tail -5 "$T/one_pipe.log")"
cli_n=$((cli_n + 1))
echo "case $cli_n: $(grep -a "resuming a run of" "$T/one_pipe.log" | head -1)"
grep -aq "resuming a run of 1 pipeline stage with 2" "$T/one_pipe.log" || cli_bad "no note"
identical "$T/one" "$T/one_pipe"

echo "stage 1 out of memory at step 15: every rank ends naming it; the same command again resumes"
O=$T/oom
cli_n=$((cli_n + 1))
on_rank 1 BERTC_DEBUG_OOM=1@15 "$O"
rc=$?
echo "case $cli_n: -> exit $rc; $(grep -ac "^bertc: rank 1 of 2: pipeline stage 1 of 2" "$O.log") ranks said: $(grep -am1 "^bertc: " "$O.log")"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1 (124: the ranks hung)"
grep -aq "^bertc: rank 1 of 2: pipeline stage 1 of 2 (layers 1-1): step 15: debug: out of memory" "$O.log" ||
    cli_bad "no line naming stage 1: $(tail -5 "$O.log")"
[ -e "$O/final" ] && cli_bad "a final model after the failure"
trainN 2 "$O" --model "$M2" --pipeline-stages 2 || cli_bad "the rerun failed: $(tail -5 "$O.log")"
grep -aq "resume    from .*step-00000010" "$O.log" || cli_bad "did not resume from step 10"
identical "$T/pipe" "$O"

echo "stage 0 sends step 3's units with a wrong header: stage 1 refuses them"
H=$T/hdr
cli_n=$((cli_n + 1))
on_rank 0 BERTC_DEBUG_PIPE_HEADER=3 "$H"
rc=$?
echo "case $cli_n: -> exit $rc: $(grep -am1 "^bertc: " "$H.log")"
[ "$rc" -eq 1 ] || cli_bad "exit $rc, want 1"
grep -aq "^bertc: rank 1 of 2: pipeline stage 1 of 2 (layers 1-1): step 3: unit 0 of the step .*: the previous stage sent a header field 129 where this one has 128" "$H.log" ||
    cli_bad "no line naming the disagreement: $(tail -3 "$H.log")"

echo "bad input"
B=("$BERTC" train "${COMMON[@]}" --model "$M2" --out "$T/bad")
mpi_bad 2 "stage 0 would hold no layer (boundaries 0, 0)" -- "${B[@]}" --pipeline-stages 2 --pipeline-split 0,0,2
mpi_bad 3 "3 ranks are not a multiple of the stages" -- "${B[@]}" --pipeline-stages 2
mpi_bad 3 "3 stages but the model has 2 encoder layers" -- "${B[@]}" --pipeline-stages 3
mpi_bad 2 "3 boundaries for 3 stages" -- "${B[@]}" --pipeline-stages 3 --pipeline-split 0,1,2
mpi_bad 2 "the boundaries must run from 0 to the model's 2 layers" -- "${B[@]}" --pipeline-stages 2 --pipeline-split 0,1,3
mpi_bad 4 "--shard-optimizer with --pipeline-stages 2 is not supported" -- "${B[@]}" --pipeline-stages 2 --shard-optimizer
expect 2 "--pipeline-stages 2: one process per stage: run it under a launcher" -- train "${COMMON[@]}" --model "$M2" \
    --out "$T/bad" --pipeline-stages 2
expect 2 "--pipeline-split 0,1,2: needs --pipeline-stages 2 or more" -- train "${COMMON[@]}" --model "$M2" \
    --out "$T/bad" --pipeline-split 0,1,2
[ -e "$T/bad" ] && cli_bad "the run dir was made"
finish
