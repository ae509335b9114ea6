// The whole model beside the kernels: the 1B-class Llama shape of examples/decoder_model.hpp
// (model 2048, 16 layers, 32/8 heads, MLP 8192, f16 cache) per weight type. model/decode: 64
// tokens one at a time after 512 in the cache; model/prefill: 512 tokens from an empty cache
// (llama-bench's tg64 at depth 512 and pp512). Each round times the model, then the read loop
// over 1 GiB on the same threads (attention/memory-read's); the counters are medians of 5
// rounds: tokens/s, the bytes a decode step reads per second, and that over the read loop
// ("read%", from each round's pair).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../examples/decoder_model.hpp"
#include "harness.hpp"

namespace bench {
namespace bench_model {
namespace {

constexpr int64_t kPrompt = 512, kDepth = 512, kTokens = 64;

// The model of the last row's weight type, kept for the rows that follow (a 1B model takes
// seconds to build).
decoder::Model* model_for(tessera_dtype weights) {
  static std::unique_ptr<decoder::Model> model;
  static tessera_dtype built = tessera_dtype(-1);
  if (model && built == weights) return model.get();
  model.reset();
  decoder::Shape s;
  s.model = 2048, s.layers = 16, s.heads = 32, s.kv_heads = 8, s.mlp = 8192;
  s.capacity = kDepth + kTokens, s.max_rows = kPrompt, s.weights = weights;
  model = std::make_unique<decoder::Model>();
  setup_ok(model->build(s), "the 1B decoder");
  built = weights;
  return model.get();
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void register_row(tessera_dtype weights, const char* type, bool decode, int threads) {
  const std::string name = std::string("model/") + (decode ? "decode" : "prefill") +
                           "/weights:" + type + "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [=](benchmark::State& state) {
        decoder::Model& m = *model_for(weights);
        const decoder::ReadBuffer buf(size_t(1) << 28);  // the read loop's 1 GiB
        std::vector<double> tok_s, read_bps, ratio;
        // (one iteration: the untimed depth, then five rounds)
        run_in_arena(state, threads, [&] {
          if (decode) {
            m.fill_input(kDepth);
            setup_ok(m.pass(kDepth, 0), "the depth's prefill");
          }
          for (int round = 0; round < 5; ++round) {
            const double t = seconds_of([&] {
              if (!decode) {
                m.fill_input(kPrompt);
                setup_ok(m.pass(kPrompt, 0), "prefill");
                return;
              }
              for (int64_t i = 0; i < kTokens; ++i) {
                setup_ok(m.feed_back(i == 0 ? kDepth - 1 : 0), "feed back");
                setup_ok(m.pass(1, kDepth + i), "decode step");
              }
            });
            double sink = 0;
            const double r = seconds_of([&] { sink = sum_over_threads(buf.data(), buf.size()); });
            benchmark::DoNotOptimize(sink);
            const double tokens = double(decode ? kTokens : kPrompt);
            const double bytes = m.step_bytes(double(kDepth) + double(kTokens + 1) / 2.0);
            tok_s.push_back(tokens / t), read_bps.push_back(4.0 * double(buf.size()) / r);
            ratio.push_back(decode ? tokens / t * bytes / read_bps.back() : 0.0);
          }
        });
        state.counters["tok_s"] = median(tok_s);
        state.counters["read_GBps"] = median(read_bps) * 1e-9;
        if (decode) {
          const double bytes = m.step_bytes(double(kDepth) + double(kTokens + 1) / 2.0);
          state.counters["step_MB"] = bytes * 1e-6;
          state.counters["GBps"] = median(tok_s) * bytes * 1e-9;
          state.counters["read%"] = 100.0 * median(ratio);
        }
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_model

void register_model() {
  using namespace bench_model;
  const struct {
    tessera_dtype t;
    const char* name;
  } types[] = {{TESSERA_Q4_0, "q4_0"}, {TESSERA_Q8_0, "q8_0"}, {TESSERA_F16, "f16"}};
  for (const auto& w : types)
    for (const bool decode : {true, false})
      for (int t : thread_counts()) register_row(w.t, w.name, decode, t);
}

}  // namespace bench
