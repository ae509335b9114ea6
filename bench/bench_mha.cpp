// The prepared multi-head attention layer's decode step: one token (model 2048, 32 query heads, 8
// KV heads, head 64) against a cache of 2048 positions, with weights and cache both f32, f16 or
// bf16, on 1 and all threads. A step reads every weight (10.5 M of them) and the whole cache once,
// so it is bound by bytes: bytes_per_second counts them at their stored sizes. The `pair` rows
// alternate the f32 and the 16-bit step in one process and report the median of the per-pair
// speedups (f32 time / 16-bit time): tokens/s with 16-bit weights and cache over f32.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/convert.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_mha {
namespace {

constexpr int64_t kModel = 2048, kHeads = 32, kKvHeads = 8, kCache = 2048;

const char* type_name(tessera_dtype t) {
  return t == TESSERA_F32 ? "f32" : t == TESSERA_F16 ? "f16" : "bf16";
}
size_t type_bytes(tessera_dtype t) { return t == TESSERA_F32 ? 4 : 2; }

// Random float values stored as `t`.
std::vector<char> stored(size_t n, uint32_t seed, float scale, tessera_dtype t) {
  std::vector<float> f = random_floats(n, seed);
  for (float& x : f) x *= scale;
  std::vector<char> out(n * type_bytes(t));
  setup_ok(
      tessera::convert(tessera::DType::f32, tessera::DType(t), int64_t(n), f.data(), out.data()),
      "convert");
  return out;
}

// One decode step's layer, cache filled to kCache - 1 positions; each run appends the token at
// the same position (the caller would advance cache_len), so every call does the same work.
struct Step {
  tessera::MhaDesc d{};
  tessera::MhaLayer layer;
  std::vector<char> wq, wk, wv, wo, kc, vc, ws;
  std::vector<float> x, out;
  tessera::Status setup = tessera::Status::ok;  // of the layer's init and workspace size

  explicit Step(tessera_dtype t) {
    setup_ok(tessera::mha_desc_init(d, 1, 1, 1, kModel, kHeads), "mha_desc_init");
    d.kv_heads = kKvHeads;
    const int64_t hd = kModel / kHeads, kv_width = kKvHeads * hd;
    const float s = 0.02f;
    wq = stored(size_t(kModel * kModel), 1, s, t);
    wk = stored(size_t(kModel * kv_width), 2, s, t);
    wv = stored(size_t(kModel * kv_width), 3, s, t);
    wo = stored(size_t(kModel * kModel), 4, s, t);
    kc = stored(size_t(kv_width * kCache), 5, 1.0f, t);
    vc = stored(size_t(kv_width * kCache), 6, 1.0f, t);
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    d.k_cache = kc.data(), d.v_cache = vc.data();
    d.cache_capacity = kCache, d.cache_len = kCache - 1;
    d.weight_type = d.cache_type = t;
    x = random_floats(size_t(kModel), 7);
    out.resize(size_t(kModel));
    size_t bytes = 0;
    setup = layer.init(d);
    if (setup == tessera::Status::ok) setup = layer.workspace_size(d, bytes);
    ws.resize(bytes);
  }
  tessera::Status run() {
    if (setup != tessera::Status::ok) return setup;
    const tessera::Status st =
        layer.forward(d, x.data(), x.data(), x.data(), out.data(), ws.data(), ws.size());
    benchmark::DoNotOptimize(out.data());
    return st;
  }
  double bytes() const {
    return double(wq.size() + wk.size() + wv.size() + wo.size() + kc.size() + vc.size());
  }
};

std::string name_of(const char* what, const std::string& types, int threads) {
  return std::string("mha/") + what + "/model:2048/heads:32/kv_heads:8/cache:2048/" + types +
         "/threads:" + std::to_string(threads);
}

void register_step(tessera_dtype t, int threads) {
  benchmark::RegisterBenchmark(
      name_of("decode-step", std::string("types:") + type_name(t), threads).c_str(),
      [t, threads](benchmark::State& state) {
        Step p(t);
        run_in_arena(state, threads, [&] { return p.run(); });
        state.counters["tokens_per_s"] =
            benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
        set_rates(state, 0.0, p.bytes());
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

// Median over 15 alternated pairs of (f32 step time) / (16-bit step time).
void register_pair(tessera_dtype t, int threads) {
  benchmark::RegisterBenchmark(
      name_of("decode-step-pair", std::string(type_name(t)) + "-vs-f32", threads).c_str(),
      [t, threads](benchmark::State& state) {
        Step f32(TESSERA_F32), half(t);
        alternated_pairs(state, threads, f32, half);
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_mha

void register_mha() {
  using namespace bench_mha;
  for (int threads : thread_counts()) {
    for (tessera_dtype t : {TESSERA_F32, TESSERA_F16, TESSERA_BF16}) register_step(t, threads);
    for (tessera_dtype t : {TESSERA_F16, TESSERA_BF16}) register_pair(t, threads);
  }
}

}  // namespace bench
