// The language-model options of the prepared layer against the same layer without them, in
// one process, alternated: rotary embeddings (NEOX, the angles computed per token) and attention
// sinks (a logit per head) on a prefill of 512 tokens and on a decode step against a cache of
// 4096 rows; and that decode step on the same cache as a ring (wrapped: 4 pinned rows and the
// latest 4092) against the plain cache of the same length. One prepared layer, the
// option set per call, so both ways read the same weights and cache at the same addresses.
// Each row first checks that both calls succeed; the counters to quote are rope_over_none,
// sinks_over_none and ring_over_none (the medians of per-round ratios).
#include <string>
#include <vector>

#include "harness.hpp"
#include "tessera/layers.hpp"
#include "tessera/tessera.h"

namespace bench {
namespace bench_lm_layer {
namespace {

struct LmShape {
  int64_t model, heads, kv_heads, q_len, cache;  // cache 0: a prefill of q_len tokens
};

struct LmLayer {
  LmShape sh;
  tessera::MhaDesc d{};
  tessera::MhaLayer layer;
  std::vector<float> wq, wk, wv, wo, x, out, kc, vc;
  std::vector<char> ws;
  tessera_status setup = TESSERA_OK;

  explicit LmLayer(LmShape s) : sh(s) {
    const int64_t M = s.model, hd = M / s.heads, kvw = s.kv_heads * hd, T = s.q_len;
    wq = random_floats(size_t(M * M), 1, -0.02f, 0.02f);
    wk = random_floats(size_t(M * kvw), 2, -0.02f, 0.02f);
    wv = random_floats(size_t(M * kvw), 3, -0.02f, 0.02f);
    wo = random_floats(size_t(M * M), 4, -0.02f, 0.02f);
    x = random_floats(size_t(T * M), 5);
    out.resize(size_t(T * M));
    setup_ok(tessera::mha_desc_init(d, 1, T, T, M, s.heads), "mha_desc_init");
    d.kv_heads = s.kv_heads, d.causal = 1;
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    if (s.cache) {  // filled to cache - q_len; each call appends at the same place
      kc = random_floats(size_t(kvw * s.cache), 6), vc = random_floats(kc.size(), 7);
      d.k_cache = kc.data(), d.v_cache = vc.data();
      d.cache_capacity = s.cache, d.cache_len = s.cache - T;
    }
    size_t bytes = 0;
    setup = tessera_status(layer.init(d));
    if (setup == TESSERA_OK) setup = tessera_status(layer.workspace_size(d, bytes));
    ws.resize(bytes);
  }
  tessera_status run(const tessera::MhaDesc& call) {
    const auto st =
        layer.forward(call, x.data(), x.data(), x.data(), out.data(), ws.data(), ws.size());
    benchmark::DoNotOptimize(out.data());
    return tessera_status(st);
  }
};

// option: "rope" or "sinks", set on a copy of the layer's call.
void register_option_row(const LmShape& s, int threads, const std::string& option) {
  const std::string name =
      "mha/" + option + "-vs-none/" + (s.cache ? "decode" : "prefill") +
      "/model:" + std::to_string(s.model) + "/heads:" + std::to_string(s.heads) +
      "/kv_heads:" + std::to_string(s.kv_heads) +
      (s.cache ? "/cache:" + std::to_string(s.cache) : "") + "/tokens:" + std::to_string(s.q_len) +
      "/threads:" + std::to_string(threads);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [s, threads, option](benchmark::State& state) {
        LmLayer p(s);
        tessera::MhaDesc with = p.d;
        const std::vector<float> sinks(size_t(s.heads), 0.5f);
        if (option == "rope") {
          with.rope.style = TESSERA_ROPE_NEOX;
        } else if (option == "sinks") {
          with.sinks = sinks.data();
        } else {  // ring: the same cache as a wrapped ring of the latest 4092 rows and 4 pinned
          with.ring_keep = 4, with.ring_window = s.cache - 4;
          with.cache_len = 3 * s.cache + 17;
        }
        if (!ok(state, p.setup) || !ok(state, p.run(p.d)) || !ok(state, p.run(with))) return;
        const Alternated t = alternate(state, threads, {[&] { p.run(p.d); }, [&] { p.run(with); }});
        state.counters[option + "_over_none"] = t.over_first[1];
        state.counters["none_us"] = t.seconds[0] * 1e6;
        state.counters[option + "_us"] = t.seconds[1] * 1e6;
      })
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace bench_lm_layer

void register_lm_layer() {
  using namespace bench_lm_layer;
  const LmShape shapes[] = {{2048, 32, 8, 512, 0}, {2048, 32, 8, 1, 4096}, {512, 8, 2, 512, 0}};
  for (int threads : thread_counts())
    for (const char* option : {"rope", "sinks", "ring"})
      for (const LmShape& s : shapes)
        if (s.cache || std::string(option) != "ring") register_option_row(s, threads, option);
}

}  // namespace bench
