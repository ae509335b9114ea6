// Bahdanau additive attention, decoding: `batch` decoder states a step (8), each against its own
// encoded sequence of enc_len positions (64 to 1024), dims 256, on 1 and all threads. The
// `batched` rows make one tessera_additive_attention_batch call a step; the `one-by-one` rows
// the same work as tessera_additive_attention_step per state. steps_per_s counts decoder states.
// The `pair` rows alternate the two in ~15 ms slices and report the median of 15 per-pair
// speedups (one-by-one time / batched time).
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/layers.hpp"

namespace bench {
namespace bench_additive {
namespace {

constexpr int64_t kBatch = 8, kDim = 256;

struct Problem {
  int64_t len;
  std::vector<float> enc, keys, dec, w_dec, v, ctx, w;
  explicit Problem(int64_t l)
      : len(l),
        enc(random_floats(size_t(kBatch * l * kDim), 1)),
        keys(random_floats(size_t(kBatch * l * kDim), 2)),
        dec(random_floats(size_t(kBatch * kDim), 3)),
        w_dec(random_floats(size_t(kDim * kDim), 4, -0.06f, 0.06f)),
        v(random_floats(size_t(kDim), 5)),
        ctx(size_t(kBatch * kDim)),
        w(size_t(kBatch * l)) {}
  tessera::Status batched() {
    const auto st = tessera::additive_attention_batch(kBatch, len, kDim, kDim, kDim, enc.data(),
                                                      keys.data(), nullptr, dec.data(),
                                                      w_dec.data(), v.data(), ctx.data(), w.data());
    benchmark::DoNotOptimize(ctx.data());
    return st;
  }
  tessera::Status one_by_one() {
    tessera::Status st = tessera::Status::ok;
    for (int64_t b = 0; b < kBatch && st == tessera::Status::ok; ++b)
      st = tessera::additive_attention_step(
          len, kDim, kDim, kDim, enc.data() + b * len * kDim, keys.data() + b * len * kDim,
          dec.data() + b * kDim, w_dec.data(), v.data(), ctx.data() + b * kDim, w.data() + b * len);
    benchmark::DoNotOptimize(ctx.data());
    return st;
  }
};

std::string name_of(const char* what, int64_t len, const char* how, int threads) {
  return std::string("additive/") + what + "/batch:8/enc:" + std::to_string(len) + "/dims:256/" +
         how + "/threads:" + std::to_string(threads);
}

void register_rows(int64_t len, int threads) {
  for (bool batched : {true, false})
    benchmark::RegisterBenchmark(
        name_of("step", len, batched ? "batched" : "one-by-one", threads).c_str(),
        [len, threads, batched](benchmark::State& state) {
          Problem p(len);
          run_in_arena(state, threads, [&] { return batched ? p.batched() : p.one_by_one(); });
          state.counters["steps_per_s"] =
              benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(
      name_of("step-pair", len, "batched-vs-one-by-one", threads).c_str(),
      [len, threads](benchmark::State& state) {
        Problem p(len);
        if (!ok(state, p.one_by_one()) || !ok(state, p.batched())) return;
        const Alternated t =
            alternate(state, threads, {[&] { p.one_by_one(); }, [&] { p.batched(); }});
        state.counters["speedup"] = 1.0 / t.over_first[1];
        state.counters["batched_steps_per_s"] = double(kBatch) / t.seconds[1];
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_additive

void register_additive() {
  using namespace bench_additive;
  for (int threads : thread_counts())
    for (int64_t len : {64, 256, 1024}) register_rows(len, threads);
}

}  // namespace bench
