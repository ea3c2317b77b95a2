# bertc report RUN: usage errors, run dirs without data, and a page rebuilt
# from CSV files alone (no trainer involved).
source "$(dirname "$0")/lib/cli.sh"

expect_help report "usage: bertc report RUN" --out
expect 2 "report: expected one run directory, got 0 argument(s)" -- report
expect 2 "report: expected one run directory, got 2 argument(s)" -- report a b
expect 2 "unknown option '--bogus'" -- report --bogus x
expect 2 "option '--out' needs a value" -- report "$cli_tmp" --out
expect 2 "report: /nonexistent/run is not a run directory" -- report /nonexistent/run
mkdir -p "$cli_tmp/empty"
expect 2 "has neither a readable metrics.csv nor monitor.csv" -- report "$cli_tmp/empty"
mkdir -p "$cli_tmp/blank" && : >"$cli_tmp/blank/metrics.csv"
expect 2 "metrics.csv: empty file (no header line)" -- report "$cli_tmp/blank"

run="$cli_tmp/run"
mkdir -p "$run/checkpoints/step-00000040"
{
    echo "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s"
    for s in $(seq 1 60); do
        echo "$s,0.$((s * 10 / 60)),$(awk -v s="$s" 'BEGIN{printf "%.4f", 3/(1+s/10)+0.5}'),3e-05,1.2,1,25.5,$((s * 2))"
    done
} >"$run/metrics.csv"
printf 'step,exact_match,f1\n20,41.5,52.25\n40,60.0,71.125\n60,58.0,70.0\n' >"$run/eval.csv"

cli_n=$((cli_n + 1))
"$BERTC" report "$run" >"$cli_tmp/out" 2>"$cli_tmp/err"
rc=$?
echo "case $cli_n: bertc report RUN -> exit $rc: $(cat "$cli_tmp/out")"
[ "$rc" -eq 0 ] || cli_bad "exit $rc: $(cat "$cli_tmp/err")"
[ "$(cat "$cli_tmp/out")" = "$run/report.html" ] || cli_bad "stdout is not the page's path"
for want in 'id="chart-loss"' 'id="chart-lr"' 'id="chart-throughput"' 'id="chart-eval"' \
            '71.12 (EM 60.00) at step 40; 3 evaluation(s)' '1 (latest step-00000040)' \
            '<li>GPU utilisation: no monitor.csv</li>' 'Duration</th><td>2 min 00 s<'; do
    grep -qF -- "$want" "$run/report.html" || cli_bad "report.html lacks '$want'"
done
grep -qiE '<script|<link|https:' "$run/report.html" && cli_bad "report.html is not self-contained"

# --out writes elsewhere and leaves RUN/report.html alone
rm -f "$run/report.html"
cli_n=$((cli_n + 1))
"$BERTC" report "$run" --out "$cli_tmp/elsewhere.html" >"$cli_tmp/out" 2>&1
rc=$?
echo "case $cli_n: bertc report RUN --out FILE -> exit $rc"
[ "$rc" -eq 0 ] && [ -s "$cli_tmp/elsewhere.html" ] && [ ! -e "$run/report.html" ] || cli_bad "--out"
expect 1 "/nonexistent/dir/r.html" -- report "$run" --out /nonexistent/dir/r.html
finish
