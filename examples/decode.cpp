// Autoregressive decoding with a prepared multi-head attention layer and its KV cache: the
// weights packed once, a prefill of the prompt, then one token per step, reusing one workspace
// (no allocation per step).
#include <cmath>
#include <cstdio>
#include <vector>

#include "tessera/layers.hpp"

int main() {
  const int64_t model = 64, heads = 8, kv_heads = 2, prompt = 16, steps = 8, cap = prompt + steps;
  tessera::MhaDesc d;
  if (tessera::mha_desc_init(d, 1, prompt, prompt, model, heads) != tessera::Status::ok) return 1;
  d.kv_heads = kv_heads;  // grouped-query attention
  d.causal = 1;
  const int64_t hd = model / heads;
  std::vector<float> wq(model * model), wk(model * kv_heads * hd), wv(wk.size()), wo(model * model);
  for (size_t i = 0; i < wq.size(); ++i)
    wq[i] = 0.05f * std::sin(float(i)), wo[i] = 0.05f * std::cos(float(i));
  for (size_t i = 0; i < wk.size(); ++i)
    wk[i] = 0.05f * std::sin(0.5f * i), wv[i] = 0.05f * std::cos(0.3f * i);
  d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
  tessera::MhaLayer layer;  // packs the weights: wq..wo could be freed now
  if (layer.init(d) != tessera::Status::ok) {
    std::fprintf(stderr, "layer: %s\n", tessera::last_error());
    return 1;
  }
  std::vector<float> k_cache(kv_heads * cap * hd), v_cache(k_cache.size());
  d.k_cache = k_cache.data(), d.v_cache = v_cache.data(), d.cache_capacity = cap, d.cache_len = 0;

  size_t bytes = 0;
  if (layer.workspace_size(d, bytes) != tessera::Status::ok) return 1;  // prefill is largest
  std::vector<char> workspace(bytes);
  std::vector<float> x(prompt * model), y(prompt * model);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.01f * i);
  if (layer.forward(d, x.data(), x.data(), x.data(), y.data(), workspace.data(), bytes) !=
      tessera::Status::ok) {
    std::fprintf(stderr, "prefill: %s\n", tessera::last_error());
    return 1;
  }
  d.cache_len = prompt;
  d.q_len = d.kv_len = 1;
  for (int64_t t = 0; t < steps; ++t, ++d.cache_len) {
    const float* token = y.data() + (prompt - 1) * model;  // feed back the last output
    std::vector<float> out(model);
    if (layer.forward(d, token, token, token, out.data(), workspace.data(), bytes) !=
        tessera::Status::ok) {
      std::fprintf(stderr, "step %lld: %s\n", (long long)t, tessera::last_error());
      return 1;
    }
    std::printf("step %lld: out[0] = %+.6f (cache %lld/%lld)\n", (long long)t, out[0],
                (long long)d.cache_len + 1, (long long)cap);
    std::copy(out.begin(), out.end(), y.begin() + (prompt - 1) * model);
  }
  return 0;
}
