#!/usr/bin/env bash
# Installs bertc's build dependencies on Debian/Ubuntu with apt-get.
# Does nothing when they are all present. Extra package names may be given
# as arguments (tests use this for optional tools).
set -euo pipefail
need=(build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libutf8proc-dev libjansson-dev libmicrohttpd-dev "$@")
# Data-parallel training (src/comm): OpenMPI, optional at build time (CMake finds it).
need+=(libopenmpi-dev openmpi-bin)
# oneDNN: bertc's training GEMM where it loads (dlopen at run time, so only the
# library; without it bertc uses OpenBLAS's sgemm and says so).
need+=(libdnnl2)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
