// The prepared multi-head attention layer against the same work as direct kernel calls, for
// prefill (batch 1, causal, no cache, q_len tokens) and decode steps (one token against a cache),
// f32. Direct calls are what a runtime would write by hand with the same packed weights:
// X W_q, X W_k, X W_v (tessera_sgemm_packed), the new rows copied into the caches per KV head,
// fused attention over [token][head][dim] rows or the caches, O W_o. Each row checks both give
// the same output, then alternates the prepared layer, the direct calls and the one-shot layer
// (tessera_mha_forward on unpacked weights) and reports the median time ratios and tokens/s.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_mha_layer {
namespace {

struct Shape {
  int64_t model, heads, kv_heads, q_len, cache;  // cache 0: prefill of q_len tokens
};

struct Problem {
  Shape sh;
  int64_t hd, kvw;
  tessera::MhaDesc d{};
  tessera::MhaLayer layer;
  std::vector<float> wq, wk, wv, wo, x, out, kc, vc;
  std::vector<char> ws, pq, pk, pv, po;  // the workspace, the packed weights of direct()
  std::vector<float> q, k, v, o;         // direct()'s intermediates
  tessera_attention_desc a{};
  tessera_status setup = TESSERA_OK;  // of the layer's init, workspace size and the packing

  explicit Problem(Shape s) : sh(s), hd(s.model / s.heads), kvw(s.kv_heads * hd) {
    const int64_t M = s.model, T = s.q_len;
    wq = random_floats(size_t(M * M), 1, -0.02f, 0.02f);
    wk = random_floats(size_t(M * kvw), 2, -0.02f, 0.02f);
    wv = random_floats(size_t(M * kvw), 3, -0.02f, 0.02f);
    wo = random_floats(size_t(M * M), 4, -0.02f, 0.02f);
    x = random_floats(size_t(T * M), 5);
    out.resize(size_t(T * M)), q.resize(size_t(T * M)), o.resize(size_t(T * M));
    k.resize(size_t(T * kvw)), v.resize(size_t(T * kvw));
    setup_ok(tessera::mha_desc_init(d, 1, T, T, M, s.heads), "mha_desc_init");
    d.kv_heads = s.kv_heads, d.causal = 1;
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    const int64_t keys = s.cache ? s.cache : T;
    setup_ok(tessera_attention_desc_init(&a, 1, s.heads, s.kv_heads, T, keys, hd, hd),
             "attention_desc_init");
    a.causal = 1, a.align = TESSERA_ALIGN_BOTTOM_RIGHT;
    a.q_stride[1] = a.o_stride[1] = hd, a.q_stride[2] = a.o_stride[2] = M;
    if (s.cache) {  // filled to cache - q_len; each call appends at the same place
      kc = random_floats(size_t(kvw * s.cache), 6), vc = random_floats(kc.size(), 7);
      d.k_cache = kc.data(), d.v_cache = vc.data();
      d.cache_capacity = s.cache, d.cache_len = s.cache - T;
      // The caches' layout: [kv_heads][capacity][dim] (attention_desc_init's).
    } else {
      a.k_stride[1] = a.v_stride[1] = hd, a.k_stride[2] = a.v_stride[2] = kvw;
    }
    size_t bytes = 0;
    setup = tessera_status(layer.init(d));
    if (setup == TESSERA_OK) setup = tessera_status(layer.workspace_size(d, bytes));
    ws.resize(bytes);
    pack(wq, M, pq), pack(wk, kvw, pk), pack(wv, kvw, pv), pack(wo, M, po);
  }
  void pack(const std::vector<float>& w, int64_t n, std::vector<char>& p) {
    p.resize(tessera_sgemm_pack_b_size(TESSERA_NO_TRANS, sh.model, n) + 64);
    const tessera_status st =
        tessera_sgemm_pack_b(TESSERA_NO_TRANS, sh.model, n, w.data(), n, p.data(), p.size());
    if (setup == TESSERA_OK) setup = st;
  }
  tessera_status prepared() {
    const auto st =
        layer.forward(d, x.data(), x.data(), x.data(), out.data(), ws.data(), ws.size());
    benchmark::DoNotOptimize(out.data());
    return tessera_status(st);
  }
  tessera_status one_shot() {
    const auto st = tessera::mha_forward(d, x.data(), x.data(), out.data(), ws.data(), ws.size());
    benchmark::DoNotOptimize(out.data());
    return tessera_status(st);
  }
  tessera_status direct() {
    const int64_t M = sh.model, T = sh.q_len;
    tessera_status st = TESSERA_OK;
    const auto gemm = [&](const float* in, const std::vector<char>& w, int64_t n, float* c) {
      const tessera_status g =
          tessera_sgemm_packed(TESSERA_NO_TRANS, T, n, M, 1, in, M, w.data(), 0, c, n);
      if (st == TESSERA_OK) st = g;
    };
    gemm(x.data(), pq, M, q.data());
    gemm(x.data(), pk, kvw, k.data());
    gemm(x.data(), pv, kvw, v.data());
    const float *keys = k.data(), *values = v.data();
    if (sh.cache) {
      for (int64_t h = 0; h < sh.kv_heads; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t row = h * sh.cache + sh.cache - T + t;
          std::memcpy(&kc[row * hd], &k[t * kvw + h * hd], size_t(hd) * 4);
          std::memcpy(&vc[row * hd], &v[t * kvw + h * hd], size_t(hd) * 4);
        }
      keys = kc.data(), values = vc.data();
    }
    const tessera_status at = tessera_attention(&a, q.data(), keys, values, o.data());
    if (st == TESSERA_OK) st = at;
    gemm(o.data(), po, M, out.data());
    benchmark::DoNotOptimize(out.data());
    return st;
  }
  // Every call succeeds and the three give the same output (or the comparison is void).
  bool agree(benchmark::State& state) {
    if (!ok(state, setup) || !ok(state, prepared())) return false;
    const std::vector<float> want = out;
    double worst = 0, mag = 1;
    for (int way = 0; way < 2; ++way) {
      if (!ok(state, way == 0 ? direct() : one_shot())) return false;
      for (size_t i = 0; i < out.size(); ++i) {
        worst = std::max(worst, double(std::fabs(out[i] - want[i])));
        mag = std::max(mag, double(std::fabs(want[i])));
      }
    }
    if (worst <= 1e-4 * mag) return true;
    state.SkipWithError("the three ways give different outputs");
    return false;
  }
};

void register_row(const Shape& s, int threads) {
  const std::string name =
      std::string("mha/") + (s.cache ? "decode" : "prefill") +
      "-vs-direct/model:" + std::to_string(s.model) + "/heads:" + std::to_string(s.heads) +
      "/kv_heads:" + std::to_string(s.kv_heads) +
      (s.cache ? "/cache:" + std::to_string(s.cache) : "") + "/tokens:" + std::to_string(s.q_len) +
      "/f32/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [s, threads](benchmark::State& state) {
        Problem p(s);
        if (!p.agree(state)) return;
        const Alternated t = alternate(
            state, threads, {[&] { p.prepared(); }, [&] { p.direct(); }, [&] { p.one_shot(); }});
        state.counters["layer_over_direct"] = 1.0 / t.over_first[1];
        state.counters["oneshot_over_layer"] = t.over_first[2];
        state.counters["layer_us"] = t.seconds[0] * 1e6;
        state.counters["direct_us"] = t.seconds[1] * 1e6;
        state.counters["tokens_per_s"] = double(s.q_len) / t.seconds[0];
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_mha_layer

void register_mha_layer() {
  using namespace bench_mha_layer;
  std::vector<Shape> shapes;
  for (int64_t model : {512, 2048})
    for (int64_t heads : {8, 32})
      for (int64_t q_len : {128, 512}) shapes.push_back({model, heads, heads / 4, q_len, 0});
  for (int64_t cache : {256, 2048, 8192}) {
    shapes.push_back({2048, 32, 8, 1, cache});
    shapes.push_back({512, 8, 8, 1, cache});
  }
  for (int threads : thread_counts())
    for (const Shape& s : shapes) register_row(s, threads);
}

}  // namespace bench
