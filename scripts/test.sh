#!/usr/bin/env bash
# Installs what is missing, checks the tree (clang-format, cppcheck, clang-tidy: scripts/lint.sh),
# then builds and runs every test: native x86-64 (Release, then ASan+UBSan, then -fno-exceptions
# as a shared library), then AArch64 and ARMv7 under qemu-user. Each stage prints ctest's summary
# line. Usage: scripts/test.sh [preset ...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --native --cross

bash scripts/lint.sh

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan noexcept aarch64 armv7)
for p in "${presets[@]}"; do
  echo "=== tests: $p ==="
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p"
  ctest --preset "$p"
  # The NEON micro-kernels' k loops, read from the disassembly: no vector register spilled in
  # a packed or wide kernel (scripts/check_neon_loops.sh).
  case "$p" in
    aarch64) bash scripts/check_neon_loops.sh aarch64-linux-gnu-objdump \
      build/aarch64/CMakeFiles/tessera_objects.dir/arch/arm/neon64.cpp.o --quiet ;;
    armv7) bash scripts/check_neon_loops.sh arm-linux-gnueabihf-objdump \
      build/armv7/CMakeFiles/tessera_objects.dir/arch/arm/neon32.cpp.o --quiet ;;
  esac
done
echo "=== all test stages passed: ${presets[*]} ==="
