#!/usr/bin/env bash
# Installs what is missing (including the peers OpenBLAS, BLIS and oneDNN, measured in the same
# run when present), builds Release and runs the benchmarks. Extra arguments go to the benchmark
# binary, e.g. scripts/bench.sh --benchmark_filter=sgemm. JSON lands in build/release/bench.json,
# and scripts/report.py turns it into build/release/report/ (report.md and the PNG plots).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --native
bash scripts/install-deps.sh --peers

cmake --preset release >/dev/null
cmake --build --preset release --target tessera_bench
./build/release/bench/tessera_bench --benchmark_out=build/release/bench.json \
  --benchmark_out_format=json "$@"

bash scripts/install-deps.sh --report
# Debian's interpreter, where python3-matplotlib is installed (a python3 earlier on PATH may not
# have it).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" scripts/report.py build/release/bench.json build/release/report
