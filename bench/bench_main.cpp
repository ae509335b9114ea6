// tessera_bench: one binary for every kernel, with the peers found on this machine measured in
// the same run. The context block printed first says which kernel table and which peer kernels
// answered, and the measured FMA peak each row's "peak%" refers to.
#include <benchmark/benchmark.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "arch/kernels.hpp"
#include "harness.hpp"
#include "peers.hpp"
#include "src/runtime/dispatch.hpp"
#include "tessera/threading.hpp"

namespace bench {

std::vector<int> thread_counts() {
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<int> out = {1};
  if (hw > 1) out.push_back(hw);
  return out;
}

namespace {

// Best of `reps` timed runs of `iters` FMA-loop iterations per thread, every thread busy at once:
// a ceiling, and on a shared machine interference only ever lowers it (a median taken in a noisy
// second put 1-thread rows at up to 120% of "peak").
// The FMA loop of the active table, or (bf16) its bf16 dot-product loop.
// kind: 0 the FMA loop, 1 the bf16 dot product's, 2 the integer dot product's.
double measure_peak(int threads, int64_t iters, int reps, int kind = 0) {
  const auto& table = tessera::detail::active_table();
  const auto loop = kind == 1 ? table.bf16dot.peak : kind == 2 ? table.quant.peak : table.peak_fma;
  const int flops = kind == 1   ? table.bf16dot.peak_flops_per_iter
                    : kind == 2 ? table.quant.peak_ops_per_iter
                                : table.peak_flops_per_iter;
  if (loop == nullptr) return 0;
  double best = 0;
  tbb::task_arena arena(threads);
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    arena.execute([&] {
      tbb::parallel_for(
          0, threads,
          [&](int) {
            volatile float sink = loop(iters);
            (void)sink;
          },
          tbb::static_partitioner());
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(iters) * flops * threads / s);
  }
  return best;
}

// A peak (kind: 0 FMA, 1 bf16 dot, 2 int8 dot) once per table and thread count, after warm-up
// runs: a vCPU that sat idle through the run before (the 1-thread rows) can take the VM a while
// to bring back, and two of four 2-thread runs here, started right after a 1-thread run,
// measured their FMA peak at the 1-thread rate (every row then read ~180%).
double cached_peak(int threads, int kind, int warmups) {
  static std::map<std::tuple<std::string, int, int>, double> cache;
  const auto key =
      std::make_tuple(std::string(tessera::detail::active_table().name), threads, kind);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  measure_peak(threads, 4'000'000, warmups, kind);
  return cache[key] = measure_peak(threads, 4'000'000, 5, kind);  // ~50 ms a run
}

}  // namespace

double peak_flops(int threads) { return cached_peak(threads, 0, 6); }
double bf16_dot_peak_flops(int threads) { return cached_peak(threads, 1, 3); }
double int8_dot_peak_ops(int threads) { return cached_peak(threads, 2, 3); }

namespace {

// Percent of `peak` FLOP/s, as a rate over the row's iterations.
benchmark::Counter percent_of(double peak, double flops_per_iter) {
  return benchmark::Counter(100.0 * flops_per_iter / peak,
                            benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

void set_peak_fraction(benchmark::State& state, double flops_per_iter, int threads) {
  state.counters["peak%"] = percent_of(peak_flops(threads), flops_per_iter);
}

void set_bf16_peak_fraction(benchmark::State& state, double flops_per_iter, int threads) {
  if (const double peak = bf16_dot_peak_flops(threads); peak > 0)
    state.counters["bf16_peak%"] = percent_of(peak, flops_per_iter);
}

void set_peak_now_fraction(benchmark::State& state, double flops_per_iter, int threads) {
  state.counters["peak_now%"] = percent_of(measure_peak(threads, 400'000, 3), flops_per_iter);
}

void register_peak();
void register_gemm();
void register_softmax();
void register_exp();
void register_convert();
void register_attention();
void register_decode_types();
void register_kv_blocks();
void register_mha();
void register_additive();
void register_mha_layer();
void register_lm_layer();
void register_paged();
void register_gemm_ex();
void register_quant_gemm();
void register_decode_stack();
void register_model();

// The CPU's name as the kernel reports it (x86 "model name"; ARM "CPU part" and implementer).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, part, implementer;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name") return value;
    if (key == "CPU part" && part.empty()) part = value;
    if (key == "CPU implementer" && implementer.empty()) implementer = value;
  }
  return part.empty() ? "unknown CPU" : "ARM implementer " + implementer + " part " + part;
}

}  // namespace bench

int main(int argc, char** argv) {
  // The default run is sized for a 2-core machine to finish in about 3 minutes: 0.1 s per row
  // unless the caller asks otherwise (quote medians of --benchmark_repetitions=5 runs).
  std::vector<char*> args(argv, argv + argc);
  char default_min_time[] = "--benchmark_min_time=0.1";
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i)
    has_min_time |= std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  if (!has_min_time) args.insert(args.begin() + 1, default_min_time);
  argc = static_cast<int>(args.size());
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("tessera kernel table: %s\n", tessera::isa_name());
  // The same facts in the JSON's context, for scripts/report.py.
  benchmark::AddCustomContext("cpu_model", bench::cpu_model());
  benchmark::AddCustomContext("tessera_table", tessera::isa_name());
  for (int t : bench::thread_counts()) {
    std::printf("measured FMA peak (%s, %d thread%s): %.1f GFLOP/s\n", tessera::isa_name(), t,
                t > 1 ? "s" : "", bench::peak_flops(t) / 1e9);
    benchmark::AddCustomContext("fma_peak_gflops_threads_" + std::to_string(t),
                                std::to_string(bench::peak_flops(t) / 1e9));
  }
  for (int t : bench::thread_counts()) {
    const double bf16 = bench::bf16_dot_peak_flops(t);
    if (bf16 == 0) break;
    std::printf("measured bf16 dot-product peak (%s, %d thread%s): %.1f GFLOP/s, %.2fx the FMA's\n",
                tessera::isa_name(), t, t > 1 ? "s" : "", bf16 / 1e9, bf16 / bench::peak_flops(t));
    benchmark::AddCustomContext("bf16_dot_peak_gflops_threads_" + std::to_string(t),
                                std::to_string(bf16 / 1e9));
  }
  for (const auto& p : bench::gemm_peers()) {
    std::printf("peer %-9s answers with: %s\n", p.name.c_str(), p.kernel.c_str());
    benchmark::AddCustomContext("peer_" + p.name, p.kernel);
  }
  if (bench::gemm_peers().empty())
    std::printf("no peer libraries found (scripts/install-deps.sh --peers)\n");
  std::fflush(stdout);
  bench::register_peak();
  bench::register_gemm();
  bench::register_gemm_ex();
  bench::register_quant_gemm();
  bench::register_decode_stack();
  bench::register_model();
  bench::register_exp();
  bench::register_convert();
  bench::register_softmax();
  bench::register_attention();
  bench::register_decode_types();
  bench::register_kv_blocks();
  bench::register_mha();
  bench::register_additive();
  bench::register_mha_layer();
  bench::register_lm_layer();
  bench::register_paged();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Two instances of OpenBLAS / BLIS (peers.cpp) each register exit-time teardown of their
  // thread pools; results are written and flushed by now, so leave without running it.
  std::fflush(nullptr);
  std::_Exit(0);
}
