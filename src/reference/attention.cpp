// Reference attention: for each query, every key's score and visibility straight from the
// definition in tessera.h, then a double-precision softmax over the visible keys. With a block
// type K, the query rounded to q8_0 as tessera.h says.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {
namespace {

// The offset of key j's row (of batch b, KV head hk) in K or V, through the block table if any.
int64_t kv_row(const tessera_attention_desc& d, const int64_t* st, int64_t b, int64_t hk,
               int64_t j) {
  if (!d.block_table) return b * st[0] + hk * st[1] + j * st[2];
  const int64_t page = d.block_table[b * d.block_table_stride + j / d.page_size];
  return page * st[0] + hk * st[1] + j % d.page_size * st[2];
}

// Row `at` of K or V as float32 (one call per row: element() per value was most of the time).
const float* widen(tessera_dtype t, const void* base, int64_t at, int64_t n, float* row) {
  if (t == TESSERA_F32) return static_cast<const float*>(base) + at;
  for (int64_t c = 0; c < n; ++c) row[c] = element(t, base, at + c);
  return row;
}

}  // namespace

void attention(const tessera_attention_desc& d, const float* q, const void* k, const void* v,
               float* o) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double scale = d.scale != 0.0f ? d.scale : 1.0 / std::sqrt(double(d.head_dim));
  const int64_t group = d.kv_heads > 0 ? d.q_heads / d.kv_heads : 1;  // no heads: no work
  std::vector<double> s(static_cast<size_t>(d.kv_len));
  std::vector<char> visible(static_cast<size_t>(d.kv_len));
  std::vector<double> acc(static_cast<size_t>(d.value_dim));
  std::vector<float> row(static_cast<size_t>(std::max(d.head_dim, d.value_dim)));
  const bool quantized_k = d.k_type == TESSERA_Q8_0 || d.k_type == TESSERA_Q4_0;
  std::vector<float> q_rounded(quantized_k ? size_t(d.head_dim) : 0);
  std::vector<float> q_rotated(d.hadamard ? size_t(d.head_dim) : 0);
  std::vector<uint8_t> q_blocks(quantized_k ? storage_bytes(TESSERA_Q8_0, d.head_dim) : 0);

  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t valid = d.kv_lens ? d.kv_lens[b] : d.kv_len;
    for (int64_t h = 0; h < d.q_heads; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < d.q_len; ++i) {
        const int64_t p = d.align == TESSERA_ALIGN_BOTTOM_RIGHT ? i + valid - d.q_len : i;
        const float* qi = q + b * d.q_stride[0] + h * d.q_stride[1] + i * d.q_stride[2];
        if (d.hadamard) {  // rotated keys: the query rotated the same way
          hadamard(1, d.head_dim, d.hadamard, qi, d.head_dim, q_rotated.data(), d.head_dim);
          qi = q_rotated.data();
        }
        if (quantized_k) {  // the scores use the query rounded to q8_0 (tessera.h)
          quantize(TESSERA_Q8_0, d.head_dim, qi, q_blocks.data());
          dequantize(TESSERA_Q8_0, d.head_dim, q_blocks.data(), q_rounded.data());
          qi = q_rounded.data();
        }
        double m = -kInf;
        bool nan = false;
        for (int64_t j = 0; j < d.kv_len; ++j) {
          bool vis = j < valid;
          if (d.causal && j > p) vis = false;
          if (d.window_left >= 0 && j < p - d.window_left) vis = false;
          if (d.window_right >= 0 && j > p + d.window_right) vis = false;
          if (d.mask && d.mask[b * d.mask_stride[0] + h * d.mask_stride[1] + i * d.mask_stride[2] +
                               j * d.mask_stride[3]] == 0)
            vis = false;
          visible[j] = 0;
          if (!vis) continue;
          const float* kr =
              widen(d.k_type, k, kv_row(d, d.k_stride, b, hk, j), d.head_dim, row.data());
          double dot = 0.0;
          for (int64_t c = 0; c < d.head_dim; ++c) dot += double(qi[c]) * double(kr[c]);
          double score = scale * dot;
          if (d.softcap > 0.0f) score = d.softcap * std::tanh(score / d.softcap);
          if (d.alibi_slopes) score += double(d.alibi_slopes[h]) * double(j - p);
          if (d.bias) {
            score += d.bias[b * d.bias_stride[0] + h * d.bias_stride[1] + i * d.bias_stride[2] +
                            j * d.bias_stride[3]];
          }
          if (score == -kInf) continue;
          if (std::isnan(score)) nan = true;
          visible[j] = 1;
          s[j] = score;
          if (score > m) m = score;
        }

        // Weights: exp(s - m); with a +inf score, the +inf keys share all the mass. A sink is one
        // more term of the sum, of a zero value row.
        const double sink = d.sinks ? double(d.sinks[h]) : -kInf;
        if (m != kInf && sink > m) m = sink;
        double sum = m != kInf && sink > -kInf ? std::exp(sink - m) : 0.0;
        for (int64_t c = 0; c < d.value_dim; ++c) acc[c] = 0.0;
        for (int64_t j = 0; j < d.kv_len; ++j) {
          if (!visible[j]) continue;
          const double w = m == kInf ? (s[j] == kInf ? 1.0 : 0.0) : std::exp(s[j] - m);
          sum += w;
          const float* vr =
              widen(d.v_type, v, kv_row(d, d.v_stride, b, hk, j), d.value_dim, row.data());
          for (int64_t c = 0; c < d.value_dim; ++c) acc[c] += w * double(vr[c]);
        }
        float* oi = o + b * d.o_stride[0] + h * d.o_stride[1] + i * d.o_stride[2];
        double lse;
        if (nan) {
          lse = std::numeric_limits<double>::quiet_NaN();
          for (int64_t c = 0; c < d.value_dim; ++c) oi[c] = static_cast<float>(lse);
        } else if (m == -kInf) {  // no visible key: zeros, never NaN
          lse = -kInf;
          for (int64_t c = 0; c < d.value_dim; ++c) oi[c] = 0.0f;
        } else {
          lse = m + std::log(sum);
          for (int64_t c = 0; c < d.value_dim; ++c) oi[c] = static_cast<float>(acc[c] / sum);
          if (d.hadamard_v) hadamard(1, d.value_dim, d.hadamard, oi, d.value_dim, oi, d.value_dim);
        }
        if (d.lse) d.lse[(b * d.q_heads + h) * d.q_len + i] = static_cast<float>(lse);
      }
    }
  }
}

}  // namespace tessera::reference
