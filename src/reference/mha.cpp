// Reference multi-head attention layer, written as plain loops (independent of the layer's
// GEMM/attention composition, so that a stride or layout slip there cannot hide here).
// Projections are rounded to float, as the layer stores them (and new cache rows to the cache's
// type); weights and cache rows are read widened from their types; everything else is double.
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {
namespace {

// y[r, :] = x[r, :] W + bias, rounded to float.
std::vector<float> project(int64_t rows, int64_t in, int64_t out, const float* x, tessera_dtype wt,
                           const void* w, const float* bias) {
  std::vector<float> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < out; ++c) {
      double acc = bias ? bias[c] : 0.0;
      for (int64_t p = 0; p < in; ++p) acc += double(x[r * in + p]) * element(wt, w, p * out + c);
      y[r * out + c] = static_cast<float>(acc);
    }
  }
  return y;
}

}  // namespace

void mha_forward(const tessera_mha_desc& d, const float* x_q, const float* x_kv, float* out) {
  const int64_t D = d.head_dim, Dv = d.value_dim, Hq = d.q_heads, Hk = d.kv_heads;
  const bool cached = d.k_cache != nullptr;
  const tessera_dtype ct = d.cache_type;
  const int64_t total = cached ? d.cache_len + d.kv_len : d.kv_len;
  const double scale = d.scale != 0.0f ? d.scale : 1.0 / std::sqrt(double(D));

  const auto qp = project(d.batch * d.q_len, d.q_in_dim, Hq * D, x_q, d.weight_type, d.w_q, d.b_q);
  const auto kp =
      project(d.batch * d.kv_len, d.kv_in_dim, Hk * D, x_kv, d.weight_type, d.w_k, d.b_k);
  const auto vp =
      project(d.batch * d.kv_len, d.kv_in_dim, Hk * Dv, x_kv, d.weight_type, d.w_v, d.b_v);

  // The new keys and values appended to the cache, rounded to its type.
  if (cached) {
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t hk = 0; hk < Hk; ++hk)
        for (int64_t t = 0; t < d.kv_len; ++t) {
          const int64_t slot = (b * Hk + hk) * d.cache_capacity + d.cache_len + t;
          for (int64_t c = 0; c < D; ++c)
            store_element(ct, d.k_cache, slot * D + c,
                          kp[(b * d.kv_len + t) * Hk * D + hk * D + c]);
          for (int64_t c = 0; c < Dv; ++c)
            store_element(ct, d.v_cache, slot * Dv + c,
                          vp[(b * d.kv_len + t) * Hk * Dv + hk * Dv + c]);
        }
  }
  // Element c of key/value j of (b, hk): from the cache (after appending the new ones) or the
  // projections.
  auto key = [&](int64_t b, int64_t hk, int64_t j, int64_t c) -> double {
    return cached ? element(ct, d.k_cache, ((b * Hk + hk) * d.cache_capacity + j) * D + c)
                  : kp[(b * d.kv_len + j) * Hk * D + hk * D + c];
  };
  auto value = [&](int64_t b, int64_t hk, int64_t j, int64_t c) -> double {
    return cached ? element(ct, d.v_cache, ((b * Hk + hk) * d.cache_capacity + j) * Dv + c)
                  : vp[(b * d.kv_len + j) * Hk * Dv + hk * Dv + c];
  };

  std::vector<float> attn(static_cast<size_t>(d.batch * d.q_len * Hq * Dv));
  std::vector<double> s(static_cast<size_t>(total)), acc(static_cast<size_t>(Dv));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < d.q_len; ++i) {
        const int64_t hk = h / (Hq / Hk);
        const int64_t p = i + total - d.q_len;  // the queries are the newest positions
        const float* qi = qp.data() + (b * d.q_len + i) * Hq * D + h * D;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < total; ++j) {
          const bool vis = !(d.causal && j > p) && !(d.window_left >= 0 && j < p - d.window_left) &&
                           !(d.window_right >= 0 && j > p + d.window_right);
          s[j] = -std::numeric_limits<double>::infinity();
          if (!vis) continue;
          double dot = 0.0;
          for (int64_t c = 0; c < D; ++c) dot += double(qi[c]) * key(b, hk, j, c);
          s[j] = scale * dot;
          if (s[j] > m) m = s[j];
        }
        // The special scores as reference::attention defines them: a NaN makes the row NaN,
        // +inf scores share all the mass, no visible key gives zeros.
        double sum = 0.0;
        bool nan = false;
        for (int64_t c = 0; c < Dv; ++c) acc[c] = 0.0;
        for (int64_t j = 0; j < total; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          nan |= std::isnan(s[j]);
          const double w = m == std::numeric_limits<double>::infinity() ? (s[j] == m ? 1.0 : 0.0)
                                                                        : std::exp(s[j] - m);
          sum += w;
          for (int64_t c = 0; c < Dv; ++c) acc[c] += w * value(b, hk, j, c);
        }
        float* row = attn.data() + (b * d.q_len + i) * Hq * Dv + h * Dv;
        for (int64_t c = 0; c < Dv; ++c)
          row[c] = nan       ? std::numeric_limits<float>::quiet_NaN()
                   : sum > 0 ? static_cast<float>(acc[c] / sum)
                             : 0.0f;
      }

  const auto y =
      project(d.batch * d.q_len, Hq * Dv, d.out_dim, attn.data(), d.weight_type, d.w_o, d.b_o);
  for (size_t i = 0; i < y.size(); ++i) out[i] = y[i];
}

}  // namespace tessera::reference
