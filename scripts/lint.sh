#!/usr/bin/env bash
# The tree is clang-formatted and quiet under cppcheck and clang-tidy (.clang-tidy).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' 2>/dev/null || find include src arch tests bench examples -name '*.[ch]pp' -o -name '*.[ch]')
echo "lint: clang-format"
clang-format --dry-run -Werror $files
echo "lint: layout (rooms, include direction, file and function sizes)"
bash scripts/check_layout.sh
echo "lint: cppcheck"
jobs=$(nproc)
cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --std=c++17 \
  --inline-suppr -j "$jobs" -I include -I . -I src src arch
echo "lint: clang-tidy"
cmake -S . -B build/lint -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DTESSERA_BUILD_TESTS=OFF \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF >/dev/null
# One clang-tidy per source, as many at once as there are cores.
out=$(printf '%s\n' src/*/*.cpp | xargs -P "$jobs" -n 1 clang-tidy -p build/lint --quiet 2>/dev/null || true)
if echo "$out" | grep -qE "(warning|error):"; then
  echo "$out"
  exit 1
fi
echo "lint: clean"
