// Softmax family: the row shapes of attention, on 1 and all threads, in bytes that must move
// (8 per element for softmax: one read, one write; 4 for logsumexp) next to a STREAM-style copy
// of the same bytes measured in the same run.
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>

#include <cstring>
#include <string>

#include "harness.hpp"
#include "tessera/softmax.hpp"
#include "tessera/threading.hpp"
#ifdef TESSERA_BENCH_ONEDNN
#include "onednn_softmax.hpp"
#endif

namespace bench {

#ifdef TESSERA_BENCH_X86_BASELINES
void mvec_softmax_rows(int64_t r0, int64_t r1, int64_t cols, const float* x, float* y);
#endif

namespace bench_softmax {
namespace {

// One read of n floats: eight partial sums the compiler vectorises with the build's own flags
// (it lived beside the AVX-512 baselines and died of an illegal instruction on AVX2 CPUs).
float read_sum(int64_t n, const float* x) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) part[u] += x[i + u];
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  for (float p : part) s += p;
  return s;
}

struct Rows {
  int64_t rows, cols;
};
const Rows kShapes[] = {{4096, 4096}, {64, 65536}, {16384, 128}, {1, 1048576}, {8, 128}};

std::string shape_name(const char* op, const Rows& s, const char* who, int threads) {
  return std::string(op) + "/rows:" + std::to_string(s.rows) + "/cols:" + std::to_string(s.cols) +
         "/" + who + "/threads:" + std::to_string(threads);
}

void register_shape(const Rows& s, int threads) {
  const double elems = double(s.rows) * s.cols;
  benchmark::RegisterBenchmark(shape_name("softmax", s, "tessera", threads).c_str(),
                               [s, threads, elems](benchmark::State& state) {
                                 auto x = random_floats(size_t(elems), 1, -8.0f, 8.0f);
                                 std::vector<float> y(x.size());
                                 run_in_arena(state, threads, [&] {
                                   const auto st = tessera::softmax(s.rows, s.cols, x.data(),
                                                                    s.cols, y.data(), s.cols, 1.0f);
                                   benchmark::DoNotOptimize(y.data());
                                   return st;
                                 });
                                 set_rates(state, 0, 8 * elems);
                                 state.counters["elem/s"] = benchmark::Counter(
                                     elems, benchmark::Counter::kIsIterationInvariantRate);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);

  benchmark::RegisterBenchmark(
      shape_name("logsumexp", s, "tessera", threads).c_str(),
      [s, threads, elems](benchmark::State& state) {
        auto x = random_floats(size_t(elems), 1, -8.0f, 8.0f);
        std::vector<float> out(size_t(s.rows));
        run_in_arena(state, threads, [&] {
          const auto st = tessera::logsumexp(s.rows, s.cols, x.data(), s.cols, 1.0f, out.data());
          benchmark::DoNotOptimize(out.data());
          return st;
        });
        set_rates(state, 0, 4 * elems);
        state.counters["elem/s"] =
            benchmark::Counter(elems, benchmark::Counter::kIsIterationInvariantRate);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);

  // The bandwidth ceiling: copy the same rows (read + write, as softmax must), rows split over
  // the threads as softmax splits them.
  benchmark::RegisterBenchmark(shape_name("softmax", s, "copy", threads).c_str(),
                               [s, threads, elems](benchmark::State& state) {
                                 auto x = random_floats(size_t(elems), 1);
                                 std::vector<float> y(x.size());
                                 run_in_arena(state, threads, [&] {
                                   tbb::parallel_for(
                                       tbb::blocked_range<int64_t>(0, int64_t(elems), 1 << 14),
                                       [&](const tbb::blocked_range<int64_t>& r) {
                                         std::memcpy(y.data() + r.begin(), x.data() + r.begin(),
                                                     sizeof(float) * r.size());
                                       });
                                   benchmark::DoNotOptimize(y.data());
                                 });
                                 set_rates(state, 0, 8 * elems);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);

#ifdef TESSERA_BENCH_X86_BASELINES
  if (tessera::isa_supported("avx512")) {
    // Three passes (max, exp-store + sum, scale) vectorised with libmvec's AVX-512 expf.
    benchmark::RegisterBenchmark(
        shape_name("softmax", s, "libmvec-3pass", threads).c_str(),
        [s, threads, elems](benchmark::State& state) {
          auto x = random_floats(size_t(elems), 1, -8.0f, 8.0f);
          std::vector<float> y(x.size());
          run_in_arena(state, threads, [&] {
            tbb::parallel_for(
                tbb::blocked_range<int64_t>(0, s.rows, std::max<int64_t>(1, 32768 / s.cols)),
                [&](const tbb::blocked_range<int64_t>& r) {
                  mvec_softmax_rows(r.begin(), r.end(), s.cols, x.data(), y.data());
                });
            benchmark::DoNotOptimize(y.data());
          });
          set_rates(state, 0, 8 * elems);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // The read ceiling for logsumexp: one read of every element.
  benchmark::RegisterBenchmark(
      shape_name("logsumexp", s, "read", threads).c_str(),
      [s, threads, elems](benchmark::State& state) {
        auto x = random_floats(size_t(elems), 1);
        run_in_arena(state, threads, [&] {
          const float total = tbb::parallel_reduce(
              tbb::blocked_range<int64_t>(0, int64_t(elems), 1 << 14), 0.0f,
              [&](const tbb::blocked_range<int64_t>& r, float acc) {
                return acc + read_sum(int64_t(r.size()), x.data() + r.begin());
              },
              [](float a, float b) { return a + b; });
          benchmark::DoNotOptimize(total);
        });
        set_rates(state, 0, 4 * elems);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
#endif
#ifdef TESSERA_BENCH_ONEDNN
  benchmark::RegisterBenchmark(shape_name("softmax", s, "onednn", threads).c_str(),
                               [s, threads, elems](benchmark::State& state) {
                                 auto x = random_floats(size_t(elems), 1, -8.0f, 8.0f);
                                 std::vector<float> y(x.size());
                                 OnednnSoftmax peer(s.rows, s.cols, x.data(), y.data(), threads);
                                 if (!peer.ok()) {
                                   state.SkipWithError("oneDNN softmax unavailable");
                                   return;
                                 }
                                 for (auto _ : state) {
                                   peer.run();
                                   benchmark::DoNotOptimize(y.data());
                                 }
                                 set_rates(state, 0, 8 * elems);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
#endif
}

}  // namespace
}  // namespace bench_softmax

void register_softmax() {
  using namespace bench_softmax;
  for (const Rows& s : kShapes)
    for (int t : thread_counts()) register_shape(s, t);
}

}  // namespace bench
