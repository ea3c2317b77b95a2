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
