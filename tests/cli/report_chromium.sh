# report.html in a real browser: headless Chromium (Debian's chromium;
# scripts/ci_extras.sh installs it) loads the page of a synthetic fp16 GPU run
# without errors, and every chart in the rendered DOM has a polyline with
# points. Prints "skipped" and passes only where chromium is not installed.
# (docs/report.png is a screenshot of a real run's page, not of this one:
# see README, "The run dir".)
source "$(dirname "$0")/lib/cli.sh"
cli_need_chromium
echo "browser: $browser ($("$browser" --version 2>/dev/null | head -1))"

# A made-up run that looks like a real one: 1800 steps of fp16 on a 15 GiB
# GPU, loss-scale halvings, six evaluations, a monitor sample per second.
run="$cli_tmp/run"
mkdir -p "$run/checkpoints/step-00000600" "$run/checkpoints/step-00001200" "$run/checkpoints/step-00001800"
awk -v run="$run" 'BEGIN {
    srand(7)
    m = run "/metrics.csv"; e = run "/eval.csv"; mon = run "/monitor.csv"
    print "step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s" > m
    print "step,exact_match,f1" > e
    split("62.1 74.3 78.6 80.7 81.9 82.4", f1, " "); split("50.2 63.1 68.9 71.4 73.0 73.6", em, " ")
    scale = 65536; t = 20; ev = 0
    for (s = 1; s <= 1800; s++) {
        t += 1.3 + 0.05 * rand()
        if (s == 30 || s == 70) scale /= 2
        if (s % 10 == 0) {
            dip = (s % 300 == 10) ? 2 : 0
            loss = 0.9 + 4.9 * exp(-s / 180) + (rand() - 0.5) * (0.9 * exp(-s / 600) + 0.25)
            lr = (s <= 180) ? 5e-5 * s / 180 : 5e-5 * (1800 - s) / 1620
            gn = 1.4 + 6 * exp(-s / 150) + rand() * 0.8
            printf "%d,%.4f,%.5f,%.6g,%.4f,%d,%.2f,%.1f\n", s, s / 900, loss, lr, gn, scale, 12 + 0.4 * rand() - dip, t > m
        }
        if (s % 300 == 0) { ev++; printf "%d,%.2f,%.2f\n", s, em[ev], f1[ev] > e; evals[int(t)] = 1; t += 95 }
    }
    print "unix_time,elapsed_s,step,gpu_util_pct,gpu_mem_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,gpu_temp_c,sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w,throttle,cpu_pct,rss_mib,mem_avail_mib" > mon
    t0 = 1717000000; in_eval = 0
    for (i = 0; i < t; i++) {
        if (i in evals) in_eval = 95
        busy = i < 20 ? 3 : (in_eval > 0 ? 55 + 10 * rand() : 94 + 5 * rand())
        used = i < 15 ? 410 : 13900 + 60 * rand()
        temp = 45 + 29 * (1 - exp(-i / 600)) + rand()
        pw = i < 20 ? 28 : (in_eval > 0 ? 48 : 63 + 7 * rand())
        thr = (pw > 69.2) ? "sw_power_cap" : (i < 20 ? "idle" : "none")
        clk = (pw > 69.2) ? 1410 : 1590
        printf "%.3f,%.3f,%d,%.0f,%.0f,%.1f,15360.0,%.0f,%d,5000,%.2f,70.00,%s,%.1f,%.1f,%.1f\n", t0 + i, i, int(i / 1.33), busy, busy * 0.45, used, temp, clk, pw, thr, 98 + 6 * rand(), 2150 + i * 0.12, 10750 - 3 * rand() > mon
        if (in_eval > 0) in_eval--
    }
}'
cat >"$run/info.csv" <<'INFO'
key,value
note,"synthetic run made by tests/cli/report_chromium.sh to test the page; no model was trained"
model,bert-base-uncased
train,squad-v1.1/train-v1.1.json
dev,squad-v1.1/dev-v1.1.json
options,"--precision fp16 --batch 32 --micro-batch 16 --lr 5e-05 --epochs 2 --max-seq-length 384 --doc-stride 128"
hardware,"GPU 0 of 1: Tesla T4 (15.0 GiB, compute 7.5) | CPU: Intel(R) Xeon(R) CPU @ 2.20GHz, 2 threads usable, AVX2 FMA AVX-512F, 12.7 GiB"
started,2024-05-29 16:26:40 +0000
skipped_steps,2
resumes,1
INFO
echo "2024-05-29 16:51:02 trainer killed by signal 9; restarting from step-00000600 (1 of 3)" >"$run/restarts.log"

"$BERTC" report "$run" >/dev/null || cli_bad "bertc report failed"
page="$run/report.html"
echo "page: $(wc -c <"$page") bytes, $(wc -l <"$run/monitor.csv") monitor rows"
grep -qiE '<script|<link|<img|https:|src=' "$page" && cli_bad "the page is not self-contained"

cli_dump_dom "file://$page" 180
cli_charts_drawn 1 chart-loss chart-lr chart-throughput chart-gradnorm chart-lossscale chart-eval chart-gpu-util \
    chart-gpu-mem chart-gpu-temp chart-gpu-power chart-cpu chart-mem
[ "$(wc -l <"$cli_tmp/charts")" -eq 12 ] || cli_bad "expected 12 charts"
grep -qF "82.40 (EM 73.60) at step 1800" "$cli_tmp/dom.html" || cli_bad "summary not in the DOM"

cli_screenshot "file://$page" 180 "$cli_tmp/report.png" --window-size=1240,2520
finish
