#!/usr/bin/env bash
# Installs what is missing (including the peers OpenBLAS, BLIS and oneDNN, measured in the same
# run when present), builds Release and runs the benchmarks. Extra arguments go to the benchmark
# binary, e.g. scripts/bench.sh --benchmark_filter=sgemm. JSON lands in build/release/bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --native
bash scripts/install-deps.sh --peers

cmake --preset release >/dev/null
cmake --build --preset release --target tessera_bench
./build/release/bench/tessera_bench --benchmark_out=build/release/bench.json \
  --benchmark_out_format=json "$@"
