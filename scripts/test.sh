#!/usr/bin/env bash
# Installs what is missing, checks the tree (clang-format, cppcheck, clang-tidy: scripts/lint.sh),
# then builds and runs every test: native x86-64 (Release, ASan+UBSan, -fno-exceptions as a
# shared library, ThreadSanitizer, the libFuzzer harnesses for a bounded time), then AArch64 and
# ARMv7 under qemu-user. Each stage prints ctest's summary line. Usage: scripts/test.sh [preset ...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --native --cross

bash scripts/lint.sh

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan noexcept tsan fuzz aarch64 armv7)
for p in "${presets[@]}"; do
  echo "=== tests: $p ==="
  start=$(date +%s)
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p"
  case "$p" in
    # TBB is not built with ThreadSanitizer: tests/tsan.supp names the reports that are TBB's
    # own, each with its reason. Every test that runs threads, the 8-thread stress test among
    # them, on the best kernel table (the tsan test preset: TESSERA_TEST_TABLES=best; the
    # scheduling is the same code for every table, whose kernels are stateless and run
    # uninstrumented here); the kernel testers and mutants, which call kernels directly on one
    # thread, run in every other stage.
    # report_atomic_races=0: the one atomic-against-plain report seen was TBB decrementing a
    # finished parallel_for's reference count on a caller's stack that the caller later reused,
    # whose TBB stack TSan could not restore (so no suppression can match it); Tessera itself
    # never mixes atomic and plain accesses to one object.
    # ignore_noninstrumented_modules=1: libtbb's own calls of operator delete and the like are
    # not checked (once in two runs the stress test reported TBB freeing its own object from a
    # worker, with no frame but libtbb's); Tessera's accesses are instrumented and still are.
    tsan) TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 history_size=7 report_atomic_races=0 ignore_noninstrumented_modules=1" \
            ctest --preset "$p" ;;
    fuzz) ctest --preset "$p"
          for h in build/fuzz/fuzz-corpus/*; do
            echo "fuzz: $(basename "$h"): $(ls "$h" | wc -l) new inputs kept in $h"
          done ;;
    *) ctest --preset "$p" ;;
  esac
  # The installed package from an out-of-tree application: find_package and pkg-config, the
  # static library (release, aarch64 under qemu) and the shared one (noexcept).
  case "$p" in
    release|noexcept|aarch64) bash scripts/check_consumer.sh "$p" ;;
  esac
  # The NEON micro-kernels' k loops, read from the disassembly: no vector register spilled in
  # a packed or wide kernel (scripts/check_neon_loops.sh).
  case "$p" in
    aarch64) for table in neon64 neon64_v82 neon64_bf16 neon64_i8mm; do
        bash scripts/check_neon_loops.sh aarch64-linux-gnu-objdump \
          build/aarch64/CMakeFiles/tessera_objects.dir/arch/arm/$table.cpp.o --quiet
      done ;;
    armv7) bash scripts/check_neon_loops.sh arm-linux-gnueabihf-objdump \
      build/armv7/CMakeFiles/tessera_objects.dir/arch/arm/neon32.cpp.o --quiet ;;
  esac
  echo "=== $p: $(( $(date +%s) - start )) s ==="
done
echo "=== all test stages passed: ${presets[*]} ==="
