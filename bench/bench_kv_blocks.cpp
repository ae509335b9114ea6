// Block-type K/V (q8_0, q4_0) where decode is not the whole story: prefill over stored K/V
// (8 heads, L = 2048, d = 128, no mask) and the prepared MHA layer's decode step with a block-type
// cache (model 2048, 32/8 heads), each alternated in one process with the same work over f16 K/V
// (15 rounds of ~15 ms slices). Counters: the median per-round speedup (f16 time / type time:
// above 1 the block type is faster), each side's median time. Both calls are checked first.
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_kv_blocks {
namespace {

const char* type_name(tessera_dtype t) {
  return t == TESSERA_Q8_0 ? "q8_0" : t == TESSERA_Q4_0 ? "q4_0" : "f16";
}

// The same K/V values stored as `type`.
std::vector<uint8_t> stored(tessera_dtype type, const std::vector<float>& x) {
  std::vector<uint8_t> out(tessera_dtype_size(type, int64_t(x.size())));
  setup_ok(tessera_convert(TESSERA_F32, type, int64_t(x.size()), x.data(), out.data()), "convert");
  return out;
}

struct Prefill {
  static constexpr int64_t kHeads = 8, kLen = 2048, kDim = 128;
  tessera_attention_desc d{};
  std::vector<float> q, o;
  std::vector<uint8_t> k, v;
  explicit Prefill(tessera_dtype type) {
    setup_ok(tessera_attention_desc_init(&d, 1, kHeads, kHeads, kLen, kLen, kDim, kDim),
             "attention_desc_init");
    d.k_type = d.v_type = type;
    q = random_floats(size_t(kHeads * kLen * kDim), 1), o.resize(q.size());
    k = stored(type, random_floats(q.size(), 2));
    v = stored(type, random_floats(q.size(), 3));
  }
  tessera_status run() {
    const tessera_status st = tessera_attention(&d, q.data(), k.data(), v.data(), o.data());
    benchmark::DoNotOptimize(o.data());
    return st;
  }
};

// One token through the prepared layer against a cache filled to `cache` - 1 rows; each call
// appends at the same place. The two ways share one prepared layer (the same weights at the same
// addresses: two layers' weights placed apart in memory moved the ratio by 15%), each with its
// cache of its type.
struct LayerWeights {
  static constexpr int64_t kModel = 2048, kHeads = 32, kKvHeads = 8;
  tessera::MhaDesc d{};
  tessera::MhaLayer layer;
  std::vector<float> wq, wk, wv, wo, x, out;
  std::vector<char> ws;
  tessera_status setup = TESSERA_OK;
  LayerWeights() {
    const int64_t kvw = kKvHeads * (kModel / kHeads);
    wq = random_floats(size_t(kModel * kModel), 1, -0.02f, 0.02f);
    wk = random_floats(size_t(kModel * kvw), 2, -0.02f, 0.02f);
    wv = random_floats(size_t(kModel * kvw), 3, -0.02f, 0.02f);
    wo = random_floats(size_t(kModel * kModel), 4, -0.02f, 0.02f);
    x = random_floats(size_t(kModel), 5), out.resize(x.size());
    setup_ok(tessera::mha_desc_init(d, 1, 1, 1, kModel, kHeads), "mha_desc_init");
    d.kv_heads = kKvHeads, d.causal = 1;
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    setup = tessera_status(layer.init(d));
  }
};
struct LayerStep {
  LayerWeights& w;
  tessera::MhaDesc d;
  std::vector<uint8_t> kc, vc;
  tessera_status setup;
  LayerStep(LayerWeights& weights, tessera_dtype type, int64_t cache)
      : w(weights), d(weights.d), setup(weights.setup) {
    const int64_t kvw = LayerWeights::kKvHeads * (LayerWeights::kModel / LayerWeights::kHeads);
    kc = stored(type, random_floats(size_t(kvw * cache), 6));
    vc = stored(type, random_floats(size_t(kvw * cache), 7));
    d.cache_type = type;
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = cache;
    d.cache_len = cache - 1;
    size_t bytes = 0;
    if (setup == TESSERA_OK) setup = tessera_status(w.layer.workspace_size(d, bytes));
    if (w.ws.size() < bytes) w.ws.resize(bytes);
  }
  tessera_status run() {
    if (setup != TESSERA_OK) return setup;
    const auto st = w.layer.forward(d, w.x.data(), w.x.data(), w.x.data(), w.out.data(),
                                    w.ws.data(), w.ws.size());
    benchmark::DoNotOptimize(w.out.data());
    return tessera_status(st);
  }
};

template <class P>
void time_pair(benchmark::State& state, int threads, P& base, P& type) {
  if (!ok(state, base.run()) || !ok(state, type.run())) return;
  const Alternated t = alternate(state, threads, {[&] { base.run(); }, [&] { type.run(); }});
  state.counters["speedup"] = 1.0 / t.over_first[1];
  state.counters["f16_ms"] = t.seconds[0] * 1e3;
  state.counters["type_ms"] = t.seconds[1] * 1e3;
}

void register_prefill(tessera_dtype type, int threads) {
  const std::string name = std::string("attention/prefill-kv-type-pair/heads:8/L:2048/d:128/") +
                           type_name(type) + "-vs-f16/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [type, threads](benchmark::State& state) {
        Prefill base(TESSERA_F16), blocks(type);
        time_pair(state, threads, base, blocks);
        const double flops = 4.0 * Prefill::kHeads * Prefill::kLen * Prefill::kLen * Prefill::kDim;
        state.counters["type_GFLOPS"] = flops / state.counters["type_ms"] * 1e-6;
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void register_layer_step(tessera_dtype type, int64_t cache, int threads) {
  const std::string name =
      std::string("mha/decode-cache-type-pair/model:2048/heads:32/kv_heads:8/") +
      "cache:" + std::to_string(cache) + "/" + type_name(type) +
      "-vs-f16/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(),
                               [type, cache, threads](benchmark::State& state) {
                                 LayerWeights w;
                                 LayerStep base(w, TESSERA_F16, cache), blocks(w, type, cache);
                                 time_pair(state, threads, base, blocks);
                                 state.counters["tokens_per_s"] = 1e3 / state.counters["type_ms"];
                               })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_kv_blocks

void register_kv_blocks() {
  using namespace bench_kv_blocks;
  for (int threads : thread_counts()) {
    register_prefill(TESSERA_Q8_0, threads);
    for (int64_t cache : {8192, 32768}) register_layer_step(TESSERA_Q8_0, cache, threads);
  }
}

}  // namespace bench
