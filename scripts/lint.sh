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
cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --std=c++17 \
  --inline-suppr -I include -I . -I src src arch
echo "lint: clang-tidy"
cmake -S . -B build/lint -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DTESSERA_BUILD_TESTS=OFF \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF >/dev/null
out=$(for f in src/*/*.cpp; do clang-tidy -p build/lint --quiet "$f" 2>/dev/null; done)
if echo "$out" | grep -q "warning:"; then
  echo "$out"
  exit 1
fi
echo "lint: clean"
