// The multi-head attention layer's decode step: one token (model 2048, 32 query heads, 8 KV heads,
// head 64) against a cache of 2048 positions, with weights and cache both f32, f16 or bf16, on
// 1 and all threads. A step reads every weight (10.5 M of them) and the whole cache once, so it
// is bound by bytes: bytes_per_second counts them at their stored sizes. The `pair` rows
// alternate the f32 and the 16-bit step in one process and report the median of the per-pair
// speedups (f32 time / 16-bit time): tokens/s with 16-bit weights and cache over f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/convert.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
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
  tessera::convert(tessera::DType::f32, tessera::DType(t), int64_t(n), f.data(), out.data());
  return out;
}

// One decode step's layer, cache filled to kCache - 1 positions; each run appends the token at
// the same position (the caller would advance cache_len), so every call does the same work.
struct Step {
  tessera::MhaDesc d{};
  std::vector<char> wq, wk, wv, wo, kc, vc, ws;
  std::vector<float> x, out;

  explicit Step(tessera_dtype t) {
    tessera::mha_desc_init(d, 1, 1, 1, kModel, kHeads);
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
    tessera::mha_workspace_size(d, bytes);
    ws.resize(bytes);
  }
  void run() {
    tessera::mha_forward(d, x.data(), x.data(), out.data(), ws.data(), ws.size());
    benchmark::DoNotOptimize(out.data());
  }
  double bytes() const {
    return double(wq.size() + wk.size() + wv.size() + wo.size() + kc.size() + vc.size());
  }
};

// The same decode step as direct calls, as a runtime would write it by hand (f32): x W_q; x W_k
// and x W_v into a row each, copied into the caches' new position per KV head; fused attention
// over the caches; o W_o. The layer's own overhead is its time over this.
struct Direct {
  Step s{TESSERA_F32};
  std::vector<float> q, kv_row, o;
  tessera_attention_desc a{};
  Direct() {
    const int64_t hd = kModel / kHeads;
    q.resize(size_t(kModel)), kv_row.resize(size_t(2 * kKvHeads * hd)), o.resize(size_t(kModel));
    tessera_attention_desc_init(&a, 1, kHeads, kKvHeads, 1, kCache, hd, hd);
    // The caches' layout: [kv_heads][capacity][dim].
    a.k_stride[1] = a.v_stride[1] = kCache * hd;
    a.k_stride[0] = a.v_stride[0] = kKvHeads * kCache * hd;
    a.causal = 1, a.align = TESSERA_ALIGN_BOTTOM_RIGHT;
  }
  void run() {
    const int64_t hd = kModel / kHeads, kvw = kKvHeads * hd;
    const auto f = [](const std::vector<char>& v) {
      return reinterpret_cast<const float*>(v.data());
    };
    const float* x = s.x.data();
    tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 1, kModel, kModel, 1, x, kModel, f(s.wq),
                  kModel, 0, q.data(), kModel);
    tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 1, kvw, kModel, 1, x, kModel, f(s.wk), kvw, 0,
                  kv_row.data(), kvw);
    tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 1, kvw, kModel, 1, x, kModel, f(s.wv), kvw, 0,
                  kv_row.data() + kvw, kvw);
    auto* kc = reinterpret_cast<float*>(s.kc.data());
    auto* vc = reinterpret_cast<float*>(s.vc.data());
    for (int64_t h = 0; h < kKvHeads; ++h) {
      std::memcpy(kc + (h * kCache + kCache - 1) * hd, kv_row.data() + h * hd, size_t(hd) * 4);
      std::memcpy(vc + (h * kCache + kCache - 1) * hd, kv_row.data() + kvw + h * hd,
                  size_t(hd) * 4);
    }
    tessera_attention(&a, q.data(), kc, vc, o.data());
    tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 1, kModel, kModel, 1, o.data(), kModel,
                  f(s.wo), kModel, 0, s.out.data(), kModel);
    benchmark::DoNotOptimize(s.out.data());
  }
  double bytes() const { return s.bytes(); }
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
        run_in_arena(state, threads, [&] { p.run(); });
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

// The layer and the direct calls give the same output (or the comparison is void).
bool same_output(Step& layer, Direct& direct) {
  layer.run(), direct.run();
  double diff = 0, mag = 1;
  for (size_t i = 0; i < layer.out.size(); ++i) {
    diff = std::max(diff, double(std::fabs(layer.out[i] - direct.s.out[i])));
    mag = std::max(mag, double(std::fabs(layer.out[i])));
  }
  return diff <= 1e-4 * mag;
}

// The layer's step against the same step as direct calls: 15 alternated pairs, the median of
// (layer time / direct time).
void register_vs_direct(int threads) {
  benchmark::RegisterBenchmark(name_of("decode-step-vs-direct", "f32", threads).c_str(),
                               [threads](benchmark::State& state) {
                                 Step layer(TESSERA_F32);
                                 Direct direct;
                                 if (!same_output(layer, direct))
                                   state.SkipWithError("the direct step differs from the layer");
                                 std::vector<double> ratios, tl, td;
                                 run_in_arena(state, threads, [&] {
                                   for (int pair = 0; pair < 15; ++pair) {
                                     const double a = seconds_per_call([&] { layer.run(); }, 15);
                                     const double b = seconds_per_call([&] { direct.run(); }, 15);
                                     tl.push_back(a), td.push_back(b), ratios.push_back(a / b);
                                   }
                                 });
                                 state.counters["layer_over_direct"] = median(ratios);
                                 state.counters["layer_us"] = median(tl) * 1e6;
                                 state.counters["direct_us"] = median(td) * 1e6;
                               })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_mha() {
  for (int threads : thread_counts()) {
    register_vs_direct(threads);
    for (tessera_dtype t : {TESSERA_F32, TESSERA_F16, TESSERA_BF16}) register_step(t, threads);
    for (tessera_dtype t : {TESSERA_F16, TESSERA_BF16}) register_pair(t, threads);
  }
}

}  // namespace bench
