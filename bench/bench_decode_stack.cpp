// A decode step through a stack of 8 prepared attention layers (model 4096, 32 / 8 heads of
// 128, a cache of 4096 rows each), called in turn as a model calls them, so that the weights
// (and caches) stream from memory: per weight and cache type, tokens/s and GB/s of the bytes a
// step reads, alternated in one process (15 rounds), 1 and 2 threads. Counters: <way>_tok_s,
// <way>_GBps and <way>_over_f16 (the median per-round speedup over f16 weights with an f16
// cache). Each stack is checked by one call before it is timed.
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/convert.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_decode_stack {
namespace {

constexpr int64_t kModel = 4096, kHeads = 32, kKvHeads = 8, kDim = 128, kCache = 4096;
constexpr int kLayers = 8;

// One layer's weights as `wt`: float32 / 16-bit ones in x out (x W), block types out x in.
std::vector<uint8_t> weight(tessera_dtype wt, int64_t in, int64_t out, uint32_t seed) {
  const auto f = random_floats(size_t(in * out), seed, -0.02f, 0.02f);
  std::vector<uint8_t> w(size_t(tessera_dtype_size(wt, in * out)));
  setup_ok(tessera_convert(TESSERA_F32, wt, in * out, f.data(), w.data()), "convert");
  return w;
}

struct Stack {
  tessera_dtype wt, ct;
  std::vector<std::unique_ptr<tessera::MhaLayer>> layers;
  std::vector<std::vector<uint8_t>> kc, vc;
  std::vector<float> x, y;
  std::vector<char> ws;
  tessera::MhaDesc d{};
  double bytes = 0;  // weights and cache rows a step reads
  tessera::Status setup = tessera::Status::ok;

  Stack(tessera_dtype w, tessera_dtype c) : wt(w), ct(c) {
    setup_ok(tessera::mha_desc_init(d, 1, 1, 1, kModel, kHeads), "mha_desc_init");
    d.kv_heads = kKvHeads, d.causal = 1, d.weight_type = wt, d.cache_type = ct;
    d.cache_capacity = kCache, d.cache_len = kCache - 1;
    const int64_t kvw = kKvHeads * kDim;
    for (int l = 0; l < kLayers && setup == tessera::Status::ok; ++l) {
      const uint32_t s = uint32_t(10 * l);
      const auto wq = weight(wt, kModel, kModel, s), wk = weight(wt, kModel, kvw, s + 1);
      const auto wv = weight(wt, kModel, kvw, s + 2), wo = weight(wt, kModel, kModel, s + 3);
      d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
      bytes += double(wq.size() + wk.size() + wv.size() + wo.size());
      layers.push_back(std::make_unique<tessera::MhaLayer>());
      setup = layers.back()->init(d);
      const auto cf = random_floats(size_t(kvw * kCache), s + 4);
      for (auto* cache : {&kc, &vc}) {
        cache->emplace_back(size_t(tessera_dtype_size(ct, int64_t(cf.size()))));
        setup_ok(
            tessera_convert(TESSERA_F32, ct, int64_t(cf.size()), cf.data(), cache->back().data()),
            "convert");
        bytes += double(cache->back().size());
      }
    }
    d.w_q = d.w_k = d.w_v = d.w_o = nullptr;
    x = random_floats(size_t(kModel), 99), y.resize(x.size());
    size_t need = 0;
    if (setup == tessera::Status::ok) {
      tessera::MhaDesc call = d;
      call.k_cache = kc[0].data(), call.v_cache = vc[0].data();
      setup = layers[0]->workspace_size(call, need);
    }
    ws.resize(need);
  }
  // One token: each layer's output is the next one's input.
  tessera::Status step() {
    for (int l = 0; l < kLayers; ++l) {
      tessera::MhaDesc call = d;
      call.k_cache = kc[size_t(l)].data(), call.v_cache = vc[size_t(l)].data();
      const float* in = l % 2 ? y.data() : x.data();
      float* out = l % 2 ? x.data() : y.data();
      const auto st = layers[size_t(l)]->forward(call, in, in, in, out, ws.data(), ws.size());
      if (st != tessera::Status::ok) return st;
    }
    benchmark::DoNotOptimize(x.data());
    return tessera::Status::ok;
  }
};

const char* type_name(tessera_dtype t) {
  return t == TESSERA_F16 ? "f16" : t == TESSERA_Q8_0 ? "q8_0" : t == TESSERA_Q4_0 ? "q4_0" : "f32";
}

void register_stack(int threads) {
  const std::string name =
      "decode_stack/layers:8/model:4096/heads:32/kv_heads:8/cache:4096/"
      "threads:" +
      std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [threads](benchmark::State& state) {
        const std::pair<tessera_dtype, tessera_dtype> ways[] = {{TESSERA_F16, TESSERA_F16},
                                                                {TESSERA_Q8_0, TESSERA_Q8_0},
                                                                {TESSERA_Q4_0, TESSERA_Q8_0},
                                                                {TESSERA_Q4_0, TESSERA_Q4_0}};
        std::vector<std::unique_ptr<Stack>> stacks;
        std::vector<std::function<void()>> fs;
        for (const auto& [wt, ct] : ways) {
          stacks.push_back(std::make_unique<Stack>(wt, ct));
          Stack* s = stacks.back().get();
          if (!ok(state, s->setup) || !ok(state, s->step())) return;
          fs.push_back([s] { s->step(); });
        }
        const Alternated t = alternate(state, threads, fs);
        for (size_t i = 0; i < stacks.size(); ++i) {
          const std::string way = std::string(type_name(stacks[i]->wt)) + "_weights_" +
                                  type_name(stacks[i]->ct) + "_cache";
          state.counters[way + "_tok_s"] = 1.0 / t.seconds[i];
          state.counters[way + "_GBps"] = stacks[i]->bytes / t.seconds[i] * 1e-9;
          if (i > 0) state.counters[way + "_over_f16"] = 1.0 / t.over_first[i];
        }
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_decode_stack

void register_decode_stack() {
  using namespace bench_decode_stack;
  for (int threads : thread_counts()) register_stack(threads);
}

}  // namespace bench
