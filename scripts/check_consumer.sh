#!/usr/bin/env bash
# An application built out of tree against an installed Tessera, as a user would: installs a
# preset's build into build/<preset>/stage, builds examples/consumer against that prefix through
# find_package (CMake, with the preset's toolchain file) and through pkg-config (its Makefile,
# with the preset's compiler), and runs both (under qemu for a cross preset).
# Usage: scripts/check_consumer.sh PRESET   (after cmake --build --preset PRESET)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=$1
root=$PWD build=$PWD/build/$preset
stage=$build/stage out=$build/consumer
case "$preset" in
  aarch64) tc=$root/toolchains/aarch64-linux-gnu.cmake cc=aarch64-linux-gnu-gcc run=(qemu-aarch64 -L /) ;;
  armv7) tc=$root/toolchains/arm-linux-gnueabihf.cmake cc=arm-linux-gnueabihf-gcc run=(qemu-arm -L /) ;;
  *) tc="" cc=cc run=() ;;
esac
rm -rf "$stage" "$out"
cmake --install "$build" --prefix "$stage" >/dev/null
pc=$(dirname "$(find "$stage" -name tessera.pc | head -n 1)")

cmake -S examples/consumer -B "$out/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$stage" ${tc:+-DCMAKE_TOOLCHAIN_FILE="$tc"} >/dev/null
cmake --build "$out/cmake" >/dev/null
echo "consumer ($preset, find_package): $("${run[@]}" "$out/cmake/consumer")"

PKG_CONFIG_PATH="$pc" PKG_CONFIG_LIBDIR="$pc" make -s -C examples/consumer CC="$cc" \
  OUT="$out/consumer-pkgconfig"
# A shared libtessera is found through the loader path (the CMake build has an RPATH).
echo "consumer ($preset, pkg-config): $(LD_LIBRARY_PATH="$(dirname "$pc")" "${run[@]}" "$out/consumer-pkgconfig")"
