#!/usr/bin/env bash
# The house rules that a script can check (docs/DESIGN.md, "Layers"):
#  1. a layer of src/ includes only itself and the layers it may use;
#  2. no two modules (a .c or .cu with its .h and its private X_impl.h or X_internal.h)
#     include each other (a header with no .c of its own, such as train/run.h, is a
#     shared declaration, not a module);
#  3. no function in src/ or tests/ is longer than 120 lines;
#  4. given a build directory (the second argument): no files of src/ call each other in
#     a circle, directly or through others, and no call goes up a layer, read from the
#     objects' symbols (nm): an arrow from a file to the file that defines a symbol it
#     uses. bertc and the CUDA module (src/backend/cuda/, also as the stand-in's
#     emu_cuda_*.cc) link apart and are read apart. The check first runs on planted
#     breaks and fails if it misses one.
# Exits 1 naming every break; prints what it checked. Run from the source root.
set -u
build=${2:-}
cd "${1:-.}" || exit 2
fail=0

# The layers each layer of src/ may include (besides itself).
declare -A may=()
while IFS=: read -r layer uses; do may[$layer]=${uses# }; done <<'LAYERS'
core:
text: core
backend: core
comm: core backend
data: core text
model: core backend
eval: core data text
obs: core backend model
infer: core backend data eval model text
serve: core backend data eval model text infer
train: core backend data eval model text infer obs comm
cli: core backend data eval model text infer obs comm train serve
LAYERS

has_impl() { if [ -e "$1.c" ] || [ -e "$1.cu" ]; then echo 1; else echo 0; fi; }
# A module is a .c or .cu with its .h; a private header X_impl.h or X_internal.h
# belongs to module X where X exists.
module() {
  local m=${1%.*} base
  base=${m%_impl}; base=${base%_internal}
  if [ "$base" != "$m" ] && { [ -e "$base.c" ] || [ -e "$base.h" ] || [ -e "$base.cu" ]; }; then m=$base; fi
  # A header whose .c sits in a folder below (backend/cpu_kernels.h, backend/cpu/cpu_kernels.c).
  if [ "$(has_impl "$m")" = 0 ]; then
    local impl
    impl=$(find "$(dirname "$m")" -name "$(basename "$m").c" 2>/dev/null | head -1)
    [ -n "$impl" ] && m=${impl%.c}
  fi
  echo "$m"
}

srcs=$(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 2>/dev/null || find src -name '*.[ch]' -o -name '*.cu')
nfiles=0 nincl=0
edges=$(mktemp); trap 'rm -f "$edges"' EXIT
for f in $srcs; do
  nfiles=$((nfiles + 1))
  layer=${f#src/}; layer=${layer%%/*}
  dir=$(dirname "$f")
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    nincl=$((nincl + 1))
    # "dir/x.h" is relative to src/, "x.h" to the including file's folder.
    if [ -e "src/$inc" ]; then target="src/$inc"; elif [ -e "$dir/$inc" ]; then target="$dir/$inc"; else continue; fi
    target=$(realpath --relative-to=. "$target")
    a=$(module "$f") b=$(module "$target")
    echo "$a $b $(has_impl "$a") $(has_impl "$b")" >>"$edges"
    tl=${target#src/}; tl=${tl%%/*}
    [ "$tl" = "$layer" ] && continue
    case " ${may[$layer]-} " in
      *" $tl "*) ;;
      *) echo "house: $f includes $target: layer $layer may not include layer $tl"; fail=1 ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
# Two modules (a .c and its .h are one) that include each other.
circles=$(awk '$1 != $2 && $3 && $4 {e[$1" "$2]=1} END {for (k in e) {split(k, p, " "); if (p[1] < p[2] && ((p[2]" "p[1]) in e)) print p[1]" <-> "p[2]}}' "$edges")
if [ -n "$circles" ]; then
  echo "$circles" | sed 's/^/house: modules include each other: /'
  fail=1
fi
echo "house: $nfiles files of src/, $nincl project includes: layers and circles checked"

# Functions over 120 lines (C and CUDA in src/ and tests/): a body is a brace at
# depth 0 after a parenthesised head; strings, characters and comments are removed first.
long=$(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'tests/*.c' 'tests/*.h' 'tests/*.cc' 'bench/*.c' | xargs awk -v max=120 '
  FNR == 1 { depth = 0; head = ""; start = 0; incomment = 0 }
  {
    s = $0
    if (incomment) { if (sub(/^.*\*\//, "", s)) incomment = 0; else next }
    gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", s)
    if (match(s, /\/\*/)) { s = substr(s, 1, RSTART - 1); incomment = 1 }
    gsub(/"([^"\\]|\\.)*"/, "\"\"", s); gsub(/\047([^\047\\]|\\.)*\047/, "0", s); sub(/\/\/.*/, "", s)
    if (s ~ /^[[:space:]]*#/) next
    for (i = 1; i <= length(s); i++) {
      ch = substr(s, i, 1)
      if (ch == "{") {
        if (depth == 0 && head ~ /\)[[:space:]]*(const)?[[:space:]]*$/ && head !~ /=[[:space:]]*$/ && head !~ /(struct|union|enum)[^(]*$/) { start = FNR; name = head; sub(/\(.*/, "", name); n = split(name, w, /[^A-Za-z0-9_]+/); name = w[n] != "" ? w[n] : w[n - 1] }
        depth++; head = ""
      } else if (ch == "}") {
        depth--
        if (depth == 0 && start) { len = FNR - start + 1; if (len > max) print FILENAME ":" start ": " name " is " len " lines"; start = 0 }
        head = ""
      } else if (ch == ";" && depth == 0) head = ""
      else if (depth == 0) head = head ch
    }
    if (depth == 0) head = head " "
  }')
if [ -n "$long" ]; then
  echo "$long" | sed 's/^/house: function over 120 lines: /'
  fail=1
fi
echo "house: function lengths checked in src/, tests/ and bench/ (at most 120 lines)"
# 4. Calls: the arrows between files from their objects' symbols.
if [ -n "$build" ] && [ -d "$build" ] && command -v nm >/dev/null; then
  syms=$(mktemp)
  trap 'rm -f "$edges" "$syms"' EXIT
  nobj=0
  while IFS= read -r o; do
    case $o in
      */emu_cuda_*.cc.o) f=${o##*/emu_}; f=src/backend/cuda/${f%.cc.o}.cu ;;
      */src/*) f=src/${o##*/src/}; f=${f%.o} ;;
      *) continue ;;
    esac
    case $o in *_race_objs.dir/*) continue ;; esac
    [ -e "$f" ] || continue
    unit=bertc
    case $f in src/backend/cuda/*) unit=module ;; esac
    nm --defined-only -g "$o" 2>/dev/null | awk -v f="$f" -v u="$unit" 'NF == 3 && $2 ~ /^[TDBR]$/ {print "D", u, $3, f}'
    nm -u "$o" 2>/dev/null | awk -v f="$f" -v u="$unit" '{print "U", u, $NF, f}'
    nobj=$((nobj + 1))
  done < <(find "$build" -name '*.o' \( -path '*/src/*' -o -name 'emu_cuda_*.cc.o' \) | sort) >"$syms"
  layers_csv=$(for l in "${!may[@]}"; do printf '%s:%s;' "$l" "${may[$l]}"; done)
  # The breaks in a list of symbols ("D unit symbol file" defines, "U unit symbol file"
  # uses): "up A -> B (symbol)", "circle A -> B (symbol)", and "stat files arrows".
  call_breaks() {
    awk -v layers="$layers_csv" '
    function layer(f,  p) { split(f, p, "/"); return p[2] }
    # whether the files left lead from a to z (a breadth-first walk)
    function reaches(a, z,  seen, q, h, t, v, k, e) {
      h = 0; t = 0; q[t++] = a; seen[a] = 1
      while (h < t) { v = q[h++]; if (v == z) return 1
        for (k in edge) { split(k, e, SUBSEP); if (e[1] == v && !(e[2] in gone) && !(e[2] in seen)) { seen[e[2]] = 1; q[t++] = e[2] } } }
      return 0
    }
    BEGIN { n = split(layers, L, ";"); for (i = 1; i <= n; i++) if (L[i] != "") { split(L[i], kv, ":"); m = split(kv[2], us, " "); for (j = 1; j <= m; j++) may[kv[1] " " us[j]] = 1 } }
    $1 == "D" { if (!(($2 " " $3) in def)) def[$2 " " $3] = $4; next }
    { use[NR] = $2 " " $3; from[NR] = $4 }
    END {
      for (r in use) if ((use[r] in def) && def[use[r]] != from[r]) {
        a = from[r]; b = def[use[r]]; sym = substr(use[r], index(use[r], " ") + 1)
        if (!((a SUBSEP b) in edge)) { edge[a, b] = sym; node[a] = 1; node[b] = 1; ne++ }
        la = layer(a); lb = layer(b)
        if (la != lb && !((la " " lb) in may) && !((a SUBSEP b) in up)) { up[a, b] = 1; print "up " a " -> " b " (" sym ")" }
      }
      # peel off files with no arrow out to a file left, or none in from one: what stays
      # lies on circles or between them
      do { changed = 0
        for (v in node) if (!(v in gone)) {
          o = 0; i = 0
          for (k in edge) { split(k, e, SUBSEP); if (e[1] == v && !(e[2] in gone)) o++; if (e[2] == v && !(e[1] in gone)) i++ }
          if (!o || !i) { gone[v] = 1; changed = 1 }
        }
      } while (changed)
      # an arrow a -> b is on a circle when b leads back to a
      for (k in edge) { split(k, e, SUBSEP); if (!(e[1] in gone) && !(e[2] in gone) && reaches(e[2], e[1])) print "circle " e[1] " -> " e[2] " (" edge[k] ")" }
      nn = 0; for (v in node) nn++
      print "stat " nn " " ne
    }' "$1"
  }
  # First on planted breaks, so that a check that sees nothing cannot pass: a circle of
  # three core files and a call from core up to train.
  planted=$(mktemp)
  printf '%s\n' "U bertc f_b src/core/a.c" "D bertc f_b src/core/b.c" "U bertc f_c src/core/b.c" \
    "D bertc f_c src/core/c.c" "U bertc f_a src/core/c.c" "D bertc f_a src/core/a.c" \
    "U bertc f_t src/core/a.c" "D bertc f_t src/train/t.c" >"$planted"
  got=$(call_breaks "$planted" | grep -cE '^(circle src/core/[abc]\.c -> src/core/[abc]\.c|up src/core/a\.c -> src/train/t\.c) ')
  rm -f "$planted"
  if [ "$got" != 4 ]; then
    echo "house: the call check found $got of 4 planted breaks (3 arrows of a circle, 1 call up)"
    fail=1
  fi
  calls=$(call_breaks "$syms")
  stat=$(echo "$calls" | sed -n 's/^stat //p')
  bad=$(echo "$calls" | grep -v '^stat ' | sort)
  if [ -n "$bad" ]; then
    echo "$bad" | sed -e 's/^up /house: a call goes up a layer: /' -e 's/^circle /house: files call each other in a circle: /'
    fail=1
  fi
  if [ "$nobj" -eq 0 ]; then
    echo "house: no objects of src/ under $build: calls not checked"
    fail=1
  else
    set -- $stat
    [ -z "$bad" ] && what="no circle, none up" || what="the breaks above"
    echo "house: calls checked between $1 files of src/ ($2 arrows, $nobj objects under $build): $what"
  fi
fi
[ $fail = 0 ] && echo "house: all rules hold"
exit $fail
