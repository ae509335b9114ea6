// The multi-head attention layer's prefill (batch 1, 512 tokens, model 2048, 32 query heads, 8 KV
// heads, head 64, causal, f32, no cache) against the same work as direct calls: X W_q, X W_k,
// X W_v, fused attention over the [token][head][dim] rows, O W_o. 15 alternated pairs, the median
// of layer time over direct time, after checking both give the same output.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace {

constexpr int64_t kModel = 2048, kHeads = 32, kKvHeads = 8, kTokens = 512, kHd = kModel / kHeads;
constexpr int64_t kKvw = kKvHeads * kHd;

struct Prefill {
  tessera::MhaDesc d{};
  std::vector<float> wq, wk, wv, wo, x, out, ws;
  std::vector<float> q, k, v, o;  // the direct calls' intermediates
  tessera_attention_desc a{};
  Prefill()
      : wq(random_floats(size_t(kModel * kModel), 1, -0.02f, 0.02f)),
        wk(random_floats(size_t(kModel * kKvw), 2, -0.02f, 0.02f)),
        wv(random_floats(size_t(kModel * kKvw), 3, -0.02f, 0.02f)),
        wo(random_floats(size_t(kModel * kModel), 4, -0.02f, 0.02f)),
        x(random_floats(size_t(kTokens * kModel), 5)),
        out(size_t(kTokens * kModel)),
        q(size_t(kTokens * kModel)),
        k(size_t(kTokens * kKvw)),
        v(size_t(kTokens * kKvw)),
        o(size_t(kTokens * kModel)) {
    tessera::mha_desc_init(d, 1, kTokens, kTokens, kModel, kHeads);
    d.kv_heads = kKvHeads, d.causal = 1;
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    size_t bytes = 0;
    tessera::mha_workspace_size(d, bytes);
    ws.resize(bytes / 4 + 1);
    tessera_attention_desc_init(&a, 1, kHeads, kKvHeads, kTokens, kTokens, kHd, kHd);
    // [token][head][dim] rows: (batch, head, seq) strides.
    a.q_stride[1] = a.o_stride[1] = kHd, a.q_stride[2] = a.o_stride[2] = kModel;
    a.k_stride[1] = a.v_stride[1] = kHd, a.k_stride[2] = a.v_stride[2] = kKvw;
    a.causal = 1;
  }
  void layer() {
    tessera::mha_forward(d, x.data(), x.data(), out.data(), ws.data(), ws.size() * 4);
    benchmark::DoNotOptimize(out.data());
  }
  void direct() {
    const auto gemm = [&](const float* in, const float* w, int64_t n, float* c) {
      tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, kTokens, n, kModel, 1, in, kModel, w, n, 0,
                    c, n);
    };
    gemm(x.data(), wq.data(), kModel, q.data());
    gemm(x.data(), wk.data(), kKvw, k.data());
    gemm(x.data(), wv.data(), kKvw, v.data());
    tessera_attention(&a, q.data(), k.data(), v.data(), o.data());
    gemm(o.data(), wo.data(), kModel, out.data());
    benchmark::DoNotOptimize(out.data());
  }
};

void register_prefill_vs_direct(int threads) {
  const std::string name =
      "mha/prefill-vs-direct/model:2048/heads:32/kv_heads:8/tokens:512/"
      "causal/f32/threads:" +
      std::to_string(threads);
  benchmark::RegisterBenchmark(name.c_str(),
                               [threads](benchmark::State& state) {
                                 Prefill p;
                                 p.layer();
                                 const std::vector<float> from_layer = p.out;
                                 p.direct();
                                 double diff = 0, mag = 1;
                                 for (size_t i = 0; i < p.out.size(); ++i) {
                                   diff =
                                       std::max(diff, double(std::fabs(p.out[i] - from_layer[i])));
                                   mag = std::max(mag, double(std::fabs(from_layer[i])));
                                 }
                                 if (!(diff <= 1e-4 * mag))
                                   state.SkipWithError("the direct prefill differs from the layer");
                                 std::vector<double> ratios, tl, td;
                                 run_in_arena(state, threads, [&] {
                                   for (int pair = 0; pair < 15; ++pair) {
                                     const double a = seconds_per_call([&] { p.layer(); }, 15);
                                     const double b = seconds_per_call([&] { p.direct(); }, 15);
                                     tl.push_back(a), td.push_back(b), ratios.push_back(a / b);
                                   }
                                 });
                                 state.counters["layer_over_direct"] = median(ratios);
                                 state.counters["layer_ms"] = median(tl) * 1e3;
                                 state.counters["direct_ms"] = median(td) * 1e3;
                               })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_mha_prefill() {
  for (int threads : thread_counts()) register_prefill_vs_direct(threads);
}

}  // namespace bench
