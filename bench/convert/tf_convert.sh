#!/usr/bin/env bash
# Loading and converting a BERT-base-sized Google checkpoint (L12 H768 A12
# I3072, vocab 30522, 512 positions, with Adam slots like a fine-tuned
# checkpoint: 1.3 GB of data, 440 MB of it used), written by TensorFlow with
# tools/make_tf_checkpoint.py --base (not committed). bertc convert against
# the same work in Python (bench/convert/tf_convert_py.py: TensorFlow's reader, the
# load_tf_weights_in_bert mapping, safetensors save), each run REPEAT times
# alternately; prints every wall time and the ratio of the medians. The
# first run of each warms the page cache.
#
#   BERTC=build/bertc bash bench/convert/tf_convert.sh [DIR] [REPEAT]
set -eu
: "${BERTC:=build/bertc}"
dir=${1:-/tmp/bertc-tfbase}
rep=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -s "$dir/bert_model.ckpt.index" ] || python3 tools/make_tf_checkpoint.py --base "$dir"
du -sh "$dir"
cat "$dir/bert_model.ckpt.data-00000-of-00001" >/dev/null
b=() p=() bc=() pc=()
for i in $(seq "$rep"); do
    /usr/bin/time -f "%e %U %S" -o "$out/t" "$BERTC" convert "$dir" "$out/bertc" --force >/dev/null
    read -r w u s <"$out/t"; b+=("$w"); bc+=("$(echo "$u + $s" | bc)")
    /usr/bin/time -f "%e %U %S" -o "$out/t" python3 bench/convert/tf_convert_py.py "$dir" "$out/py" | tail -1
    read -r w u s <"$out/t"; p+=("$w"); pc+=("$(echo "$u + $s" | bc)")
done
echo "bertc convert: wall s ${b[*]}; CPU s ${bc[*]} (bertc fsyncs what it writes; Python does not)"
echo "python (TF reader + safetensors), with imports: wall s ${p[*]}; CPU s ${pc[*]}"
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mb=$(med "${b[@]}"); mp=$(med "${p[@]}"); cb=$(med "${bc[@]}"); cp=$(med "${pc[@]}")
echo "median wall: bertc $mb s, python $mp s, ratio $(echo "scale=2; $mp / $mb" | bc)x"
echo "median CPU: bertc $cb s, python $cp s, ratio $(echo "scale=2; $cp / $cb" | bc)x"
python3 - "$out/bertc/model.safetensors" "$out/py/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert set(a) == set(b), (set(a) ^ set(b))
bad = [k for k in a if not (a[k] == b[k]).all()]
print("outputs: %d tensors, %s" % (len(a), "identical" if not bad else "DIFFER: %s" % bad[:3]))
sys.exit(1 if bad else 0)
PY
