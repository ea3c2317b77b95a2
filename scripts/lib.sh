# Shared by the scripts in bench/ and scripts/: source it, then call
#
#   parse_opts "USAGE" --name VAR [--name VAR ...] -- "$@"
#
# which sets each VAR from `--name VALUE` or `--name=VALUE` on the command
# line. An unknown option, or one without its value, prints the offending
# argument and USAGE to stderr and exits 2. Variables keep their defaults
# when their option is absent, so set the defaults before the call.
parse_opts() {
    local usage=$1
    shift
    local -A var_of=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        var_of[$1]=$2
        shift 2
    done
    shift
    local arg name
    while [ $# -gt 0 ]; do
        arg=$1
        case $arg in
        --*=*) name=${arg%%=*} ;;
        *) name=$arg ;;
        esac
        if [ -z "${var_of[$name]:-}" ]; then
            echo "$(basename "$0"): unknown argument '$arg'" >&2
            echo "usage: $usage" >&2
            exit 2
        fi
        if [ "$name" != "$arg" ]; then
            printf -v "${var_of[$name]}" '%s' "${arg#*=}"
            shift
        elif [ $# -ge 2 ]; then
            printf -v "${var_of[$name]}" '%s' "$2"
            shift 2
        else
            echo "$(basename "$0"): $name needs a value" >&2
            echo "usage: $usage" >&2
            exit 2
        fi
    done
}

# squad_slice_setup DIR DATA CONFIG: what the CPU training benches share:
# DIR/model, `bertc init --config CONFIG` (BERTC), and DIR/train.json, SQuAD
# dev's first 4 articles from DATA (jq slices them, so that every step is a
# whole batch). Exits 2 without jq.
squad_slice_setup() {
    local dir=$1 data=$2 config=$3
    command -v jq >/dev/null || { echo "jq is needed (scripts/ci_extras.sh installs it)" >&2; exit 2; }
    "$BERTC" init --config "$config" --vocab "$data/vocab/bert-base-uncased-vocab.txt" --out "$dir/model" >/dev/null
    jq '{version: .version, data: .data[0:4]}' "$data/squad-v1.1/dev-v1.1.json" >"$dir/train.json"
}
