#!/usr/bin/env bash
# Installs every Debian package Tessera needs; idempotent, safe to re-run.
#   scripts/install-deps.sh [--native] [--cross] [--peers] [--report] [--mca]
#   (no flag: native + cross)
# --native: compilers (clang with libFuzzer too), cmake, xsimd, oneTBB, GoogleTest, Google Benchmark
# --cross : aarch64 / armhf cross compilers, qemu-user, and the arm64/armhf builds of the libraries
# --peers : OpenBLAS, BLIS and oneDNN, measured by the benchmarks when present
# --report: python3-matplotlib, for scripts/report.py's plots
# --mca   : llvm 22 for llvm-mca-22, whose models scripts/mca_loops.py reads (current ARM cores)
set -euo pipefail

want_native=0 want_cross=0 want_peers=0 want_report=0 want_mca=0
[ $# -eq 0 ] && want_native=1 want_cross=1
for a in "$@"; do
  case "$a" in
    --native) want_native=1 ;;
    --cross) want_cross=1 ;;
    --peers) want_peers=1 ;;
    --report) want_report=1 ;;
    --mca) want_mca=1 ;;
    *) echo "install-deps: unknown option '$a'" >&2; exit 2 ;;
  esac
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

native_pkgs=(build-essential cmake ninja-build pkg-config libxsimd-dev libtbb-dev libgtest-dev
             libbenchmark-dev clang-format clang-tidy cppcheck git clang libclang-rt-14-dev)
cross_pkgs=(g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user
            libtbb-dev:arm64 libgtest-dev:arm64 libbenchmark-dev:arm64
            libtbb-dev:armhf libgtest-dev:armhf libbenchmark-dev:armhf)
peer_pkgs=(libopenblas-dev libblis-dev libdnnl-dev)
report_pkgs=(python3 python3-matplotlib)
mca_pkgs=(llvm-22)

pkgs=()
[ $want_native -eq 1 ] && pkgs+=("${native_pkgs[@]}")
[ $want_cross -eq 1 ] && pkgs+=("${cross_pkgs[@]}")
[ $want_peers -eq 1 ] && pkgs+=("${peer_pkgs[@]}")
[ $want_report -eq 1 ] && pkgs+=("${report_pkgs[@]}")
[ $want_mca -eq 1 ] && pkgs+=("${mca_pkgs[@]}")

if [ $want_cross -eq 1 ]; then
  for arch in arm64 armhf; do
    dpkg --print-foreign-architectures | grep -qx "$arch" || $SUDO dpkg --add-architecture "$arch"
  done
fi

missing() {
  local p out=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
  done
  echo "${out[@]:-}"
}

todo=$(missing)
if [ -z "$todo" ]; then
  echo "install-deps: everything is installed"
  exit 0
fi
echo "install-deps: installing $todo"

# A mirror that is mid-sync can fail one index; retry, then go on if the packages are findable.
for attempt in 1 2 3; do
  if $SUDO apt-get update -q; then break; fi
  echo "install-deps: apt-get update failed (attempt $attempt), retrying" >&2
  sleep $((attempt * 5))
done

# shellcheck disable=SC2086
for attempt in 1 2 3; do
  if $SUDO apt-get install -y -q --no-install-recommends $todo; then
    todo=""
    break
  fi
  echo "install-deps: apt-get install failed (attempt $attempt), retrying" >&2
  sleep $((attempt * 5))
  $SUDO apt-get update -q || true
done
todo=$(missing)
if [ -n "$todo" ]; then
  if [ $want_peers -eq 1 ] && [ $want_native -eq 0 ] && [ $want_cross -eq 0 ]; then
    echo "install-deps: peers not installed ($todo); benchmarks will run without them" >&2
    exit 0
  fi
  echo "install-deps: could not install: $todo" >&2
  exit 1
fi
echo "install-deps: done"
