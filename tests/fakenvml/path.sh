# Prints the path of the fake NVML library (sourced or run by the tests):
# the build tree's (tests/fakenvml/CMakeLists.txt) when it is there, else one
# compiled now into ${1:-a temp dir} with ${CC:-cc}. Exit 1 when neither works.
fake_nvml_path() {
    local lib="${BERTC_BUILD:-build}/fakenvml/libnvidia-ml.so.1"
    if [ -r "$lib" ]; then
        echo "$lib"
        return 0
    fi
    local dir="${1:-$(mktemp -d)}"
    lib="$dir/libnvidia-ml.so.1"
    "${CC:-cc}" -shared -fPIC -O1 -o "$lib" "$(dirname "${BASH_SOURCE[0]}")/fakenvml.c" >&2 || return 1
    echo "$lib"
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then fake_nvml_path "$@"; fi
