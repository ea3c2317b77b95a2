#!/usr/bin/env bash
# Feature preparation speed: `bertc features` against run_qa.py's
# prepare_train_features / prepare_validation_features with BertTokenizerFast
# (bench/tokenize/features_hf.py), on all of SQuAD v1.1 dev, same thread count.
#
#   bench/tokenize/features_vs_hf.sh [THREADS]   (BERTC=path/to/bertc, default build/bertc)
#
# bertc's time is the whole process (start, JSON, vocab, tokenising, windows,
# labels and offsets: what both prepare functions give together). The
# Hugging Face times start after Python and transformers are imported and
# include reading the JSON and building the tokenizer; "train" is
# prepare_train_features alone, "both" adds prepare_validation_features.
set -eu
cd "$(dirname "$0")/../.."
BERTC=${BERTC:-build/bertc}
DATA=${BERTC_DATA:-../shared/data}
threads=${1:-$(nproc)}
squad=$DATA/squad-v1.1/dev-v1.1.json
vocab=$DATA/vocab/bert-base-uncased-vocab.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/model"
cp "$vocab" "$tmp/model/vocab.txt"
echo '{"do_lower_case": true}' >"$tmp/model/tokenizer_config.json"

echo "machine: $(lscpu | grep 'Model name' | sed 's/.*: *//'), $(nproc) cores; threads $threads"
echo "bertc: $BERTC features --model M --data $squad --threads $threads"
start=$(date +%s.%N)
/usr/bin/time -f "%U %S" -o "$tmp/bertc.cpu" "$BERTC" features --model "$tmp/model" --data "$squad" --threads "$threads" >"$tmp/bertc.out"
end=$(date +%s.%N)
sed 's/^/  /' "$tmp/bertc.out"
b_s=$(echo "$end - $start" | bc -l)
b_cpu=$(awk '{print $1 + $2}' "$tmp/bertc.cpu")
b_n=$(sed -n 's/^features: \([0-9]*\).*/\1/p' "$tmp/bertc.out")

echo "hf: python3 bench/tokenize/features_hf.py --data $squad --vocab $vocab --threads $threads"
python3 bench/tokenize/features_hf.py --data "$squad" --vocab "$vocab" --threads "$threads" 2>/dev/null >"$tmp/hf.out"
sed 's/^/  /' "$tmp/hf.out"
read -r h_n h_train h_both h_train_cpu h_both_cpu < <(sed -n \
    's/^hf: features \([0-9]*\) train_s \([0-9.]*\) both_s \([0-9.]*\) train_cpu \([0-9.]*\) both_cpu \([0-9.]*\)/\1 \2 \3 \4 \5/p' "$tmp/hf.out")

[ "$b_n" = "$h_n" ] || echo "WARNING: feature counts differ: bertc $b_n, hf $h_n"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows both sides' wall times)"
printf '%-40s %8s %8s %8s %12s\n' "" wall_s cpu_s features features/s
printf '%-40s %8.3f %8.3f %8d %12.0f\n' "bertc features (whole process)" "$b_s" "$b_cpu" "$b_n" "$(echo "$b_n / $b_s" | bc -l)"
printf '%-40s %8.3f %8.3f %8d %12.0f\n' "hf prepare_train_features" "$h_train" "$h_train_cpu" "$h_n" "$(echo "$h_n / $h_train" | bc -l)"
printf '%-40s %8.3f %8.3f %8d %12.0f\n' "hf prepare_train + prepare_validation" "$h_both" "$h_both_cpu" "$h_n" "$(echo "$h_n / $h_both" | bc -l)"
printf 'ratio (wall): bertc is %.1fx faster than prepare_train_features, %.1fx than both\n' \
    "$(echo "$h_train / $b_s" | bc -l)" "$(echo "$h_both / $b_s" | bc -l)"
printf 'ratio (CPU time): %.1fx and %.1fx\n' "$(echo "$h_train_cpu / $b_cpu" | bc -l)" "$(echo "$h_both_cpu / $b_cpu" | bc -l)"
