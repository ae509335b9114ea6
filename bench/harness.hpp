// Shared benchmark plumbing: thread-count control for Tessera (a tbb::task_arena, the way an
// application bounds it) and the peers, seeded inputs, FLOP and byte counters, and the measured
// FMA peak each GEMM row is reported against.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <benchmark/benchmark.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/common.hpp"

namespace bench {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// A row checks its call before it times it: a status that is not OK skips the row with the
// library's message (a rejected call would otherwise be timed as a fast one). Returns whether
// to time.
inline bool ok(benchmark::State& state, tessera_status s) {
  if (s == TESSERA_OK) return true;
  state.SkipWithError((std::string("the call failed: ") + tessera_last_error()).c_str());
  return false;
}
inline bool ok(benchmark::State& state, tessera::Status s) { return ok(state, tessera_status(s)); }

// A benchmark's setup (a conversion, a pack, a pool) must succeed: a failed one would time a
// row on buffers nothing wrote, so the run stops there with the library's message.
inline void setup_ok(tessera_status s, const char* what) {
  if (s == TESSERA_OK) return;
  std::fprintf(stderr, "benchmark setup failed: %s: %s\n", what, tessera_last_error());
  std::exit(1);
}
inline void setup_ok(tessera::Status s, const char* what) { setup_ok(tessera_status(s), what); }

// Runs the benchmark loop of `body` inside an arena of `threads` TBB threads. A body that
// returns its call's status is called once first, untimed, and the row is skipped unless it
// succeeded.
template <class F>
void run_in_arena(benchmark::State& state, int threads, F&& body) {
  tbb::task_arena arena(threads);
  arena.execute([&] {
    if constexpr (!std::is_void_v<decltype(body())>) {
      if (!ok(state, body())) return;
    }
    for (auto _ : state) body();
  });
}

// Rates: flops and bytes per iteration become per-second counters (decimal units).
// The median of v (the upper one for an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Seconds per call of f, calling it for at least `ms` milliseconds: one slice of an alternated
// pair measurement.
template <class F>
double seconds_per_call(F&& f, int ms) {
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  do {
    f();
    ++calls;
  } while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(ms));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

// Times of several ways to do the same work, measured alternately: 15 rounds of a ~15 ms slice
// of each, the order reversed every round so none always follows another's cache state.
// seconds[i]: the median slice time of fs[i]; over_first[i]: the median over rounds of
// t_i / t_0 (the ratio within a round, so a drift of the shared VM's clock cancels).
struct Alternated {
  std::vector<double> seconds, over_first;
  std::vector<std::vector<double>> rounds;  // [round][i]: that round's slice time of fs[i]
};
inline Alternated alternate(benchmark::State& state, int threads,
                            const std::vector<std::function<void()>>& fs) {
  const size_t n = fs.size();
  std::vector<std::vector<double>> times(n), ratios(n), rounds;
  run_in_arena(state, threads, [&] {
    for (int round = 0; round < 15; ++round) {
      std::vector<double> t(n);
      for (size_t j = 0; j < n; ++j) {
        const size_t i = round % 2 == 0 ? j : n - 1 - j;
        t[i] = seconds_per_call(fs[i], 15);
      }
      for (size_t i = 0; i < n; ++i) times[i].push_back(t[i]), ratios[i].push_back(t[i] / t[0]);
      rounds.push_back(t);
    }
  });
  Alternated a;
  a.rounds = rounds;
  for (size_t i = 0; i < n; ++i)
    a.seconds.push_back(median(times[i])), a.over_first.push_back(median(ratios[i]));
  return a;
}

// 15 alternated pairs of ~15 ms slices of a float32 problem and its 16-bit twin (each with
// run() and bytes()), on `threads`, which goes first alternating so neither always follows the
// other's cache state; counters: the median speedup (f32 time / 16-bit time), each side's median
// time and GB/s (alternate()'s rounds).
template <class P>
void alternated_pairs(benchmark::State& state, int threads, P& f32, P& half) {
  if constexpr (!std::is_void_v<decltype(f32.run())>) {  // each call checked before it is timed
    if (!ok(state, f32.run()) || !ok(state, half.run())) return;
  }
  const Alternated t = alternate(state, threads, {[&] { f32.run(); }, [&] { half.run(); }});
  state.counters["speedup"] = 1.0 / t.over_first[1];
  state.counters["f32_us"] = t.seconds[0] * 1e6;
  state.counters["half_us"] = t.seconds[1] * 1e6;
  state.counters["half_GBps"] = half.bytes() / t.seconds[1] * 1e-9;
  state.counters["f32_GBps"] = f32.bytes() / t.seconds[0] * 1e-9;
}

// One pass over x summing it, split over the calling arena's threads: the read ceiling.
inline double sum_over_threads(const float* x, size_t n) {
  return tbb::parallel_reduce(
      tbb::blocked_range<int64_t>(0, int64_t(n), 1 << 16), 0.0,
      [&](const tbb::blocked_range<int64_t>& r, double acc) {
        float s[8] = {};
        for (int64_t i = r.begin(); i + 8 <= r.end(); i += 8)
          for (int u = 0; u < 8; ++u) s[u] += x[size_t(i + u)];
        for (float v : s) acc += v;
        return acc;
      },
      [](double a, double b) { return a + b; });
}
inline double sum_over_threads(const std::vector<float>& x) {
  return sum_over_threads(x.data(), x.size());
}

inline void set_rates(benchmark::State& state, double flops, double bytes) {
  if (flops > 0)
    state.counters["FLOP/s"] = benchmark::Counter(
        flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if (bytes > 0)
    state.counters["B/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

// The FMA peak (FLOP/s) of the active kernel table on `threads` threads, measured once at start.
double peak_flops(int threads);
// Adds "peak%" = achieved FLOP/s / peak FLOP/s of the active table (call after the loop).
void set_peak_fraction(benchmark::State& state, double flops_per_iter, int threads);
// The active table's bf16 dot-product peak (FLOP/s; 0 where it has no bf16 dot product), and
// "bf16_peak%" against it: the bf16 x bf16 rows' ceiling.
double bf16_dot_peak_flops(int threads);
void set_bf16_peak_fraction(benchmark::State& state, double flops_per_iter, int threads);
// The active table's integer dot-product peak (operations/s: a multiply and an add per product;
// 0 where it has none): the int8 GEMM rows' ceiling.
double int8_dot_peak_ops(int threads);
// Adds "peak_now%": against a short peak (~15 ms) taken right after the row's timing loop. The
// clock of a shared VM drifts by 10-20% over minutes (seen here: the 1-thread peak read 185
// GFLOP/s at one start and 219 at another), so a row measured minutes after the start can read
// above 100% "peak%". Tessera's rows only: a peer's worker threads spin for a while after its
// call (OpenBLAS's for ~0.1 s) and would take the second core from the peak measured after it.
void set_peak_now_fraction(benchmark::State& state, double flops_per_iter, int threads);

// Thread counts the default run measures: 1 and every core (2 here).
std::vector<int> thread_counts();

// The last-level cache Google Benchmark found (bytes, 0 if none) and its name ("L3"): a working
// set within it is read from that cache, and no DRAM bandwidth is its ceiling.
inline int64_t llc_bytes(std::string* name = nullptr) {
  int64_t best = 0;
  for (const auto& c : benchmark::CPUInfo::Get().caches)
    if (c.type != "Instruction" && int64_t(c.size) > best) {
      best = int64_t(c.size);
      if (name) *name = "L" + std::to_string(c.level);
    }
  return best;
}

}  // namespace bench
