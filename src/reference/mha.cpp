// Reference multi-head attention layer: projections as plain loops, then reference::attention on
// packed copies of Q, K and V (independent of the layer's strided views of its GEMMs, so that a
// stride or layout slip there cannot hide here). Projections are rounded to float, as the layer
// stores them (and new cache rows to the cache's type); weights and cache rows are read widened
// from their types; the attention is reference::attention's, in double.
#include <algorithm>
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {
namespace {

bool paged(const tessera_mha_desc& d) { return d.block_table && d.k_cache; }

// The cache row of position p of (batch b, KV head hk): [batch][head][capacity], or the pool's
// [head][page][page_size] through the block table.
int64_t cache_row(const tessera_mha_desc& d, int64_t b, int64_t hk, int64_t p) {
  if (!paged(d)) return (b * d.kv_heads + hk) * d.cache_capacity + p;
  const int64_t page = d.block_table[b * d.block_table_stride + p / d.page_size];
  return (hk * d.num_pages + page) * d.page_size + p % d.page_size;
}

// y[r, :] = x[r, :] W + bias, rounded to float. A block-type W is stored out x in (blocks along
// in) and multiplies x's rows rounded to q8_0, as tessera_gemm_ex does.
std::vector<float> project(int64_t rows, int64_t in, int64_t out, const float* x, tessera_dtype wt,
                           const void* w, const float* bias) {
  const bool block = wt == TESSERA_Q8_0 || wt == TESSERA_Q4_0;
  std::vector<float> wf(size_t(in * out)), xr(static_cast<size_t>(in));
  std::vector<uint8_t> xq(storage_bytes(TESSERA_Q8_0, block ? in : 0));
  if (block)
    dequantize(wt, in * out, w, wf.data());  // [c][p]
  else  // [p][c], widened once (transposed to [c][p]) rather than at every product
    for (int64_t p = 0; p < in; ++p)
      for (int64_t c = 0; c < out; ++c) wf[size_t(c * in + p)] = element(wt, w, p * out + c);
  std::vector<float> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(x + r * in, x + (r + 1) * in, xr.begin());
    if (block) {
      quantize(TESSERA_Q8_0, in, xr.data(), xq.data());
      dequantize(TESSERA_Q8_0, in, xq.data(), xr.data());
    }
    for (int64_t c = 0; c < out; ++c) {
      double acc = bias ? bias[c] : 0.0;
      for (int64_t p = 0; p < in; ++p) acc += double(xr[size_t(p)]) * wf[size_t(c * in + p)];
      y[r * out + c] = static_cast<float>(acc);
    }
  }
  return y;
}

// The rotary embedding of each new token's query and key heads at its position.
void rope_new_tokens(const tessera_mha_desc& d, std::vector<float>& qp, std::vector<float>& kp) {
  const int64_t D = d.head_dim, Hq = d.q_heads, Hk = d.kv_heads, Lkv = d.kv_len;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t t = 0; t < Lkv; ++t) {
      const int64_t first = d.block_table ? d.cache_lens[b] : d.k_cache ? d.cache_len : 0;
      const double pos = double(d.rope_positions ? d.rope_positions[b * Lkv + t] : first + t);
      for (int64_t h = 0; h < Hq; ++h)
        rope_row(d.rope, D, pos, &qp[size_t(((b * Lkv + t) * Hq + h) * D)]);
      for (int64_t h = 0; h < Hk; ++h)
        rope_row(d.rope, D, pos, &kp[size_t(((b * Lkv + t) * Hk + h) * D)]);
    }
}

// Each sequence's keys with a paged cache (cache_lens + kv_len; {0} without a batch).
std::vector<int32_t> paged_lens(const tessera_mha_desc& d) {
  std::vector<int32_t> lens;
  for (int64_t b = 0; paged(d) && b < d.batch; ++b)
    lens.push_back(int32_t(d.cache_lens[b] + d.kv_len));
  if (lens.empty()) lens.push_back(0);
  return lens;
}

}  // namespace

void mha_forward(const tessera_mha_desc& d, const float* x_q, const float* x_k, const float* x_v,
                 float* out) {
  const int64_t D = d.head_dim, Dv = d.value_dim, Hq = d.q_heads, Hk = d.kv_heads;
  const int64_t B = d.batch, Lq = d.q_len, Lkv = d.kv_len;
  const bool cached = d.k_cache != nullptr;
  const tessera_dtype ct = d.cache_type;
  // Keys per sequence: a paged cache's own lengths, in arrays as long as the longest.
  const std::vector<int32_t> lens = paged_lens(d);
  const int64_t total = paged(d) ? *std::max_element(lens.begin(), lens.end())
                        : cached ? d.cache_len + Lkv
                                 : Lkv;
  auto held = [&](int64_t b) { return paged(d) ? d.cache_lens[b] : d.cache_len; };

  auto qp = project(B * Lq, d.q_in_dim, Hq * D, x_q, d.weight_type, d.w_q, d.b_q);
  auto kp = project(B * Lkv, d.kv_in_dim, Hk * D, x_k, d.weight_type, d.w_k, d.b_k);
  auto vp = project(B * Lkv, d.kv_in_dim, Hk * Dv, x_v, d.weight_type, d.w_v, d.b_v);
  // Rotary embeddings of the queries and the new keys (q_len == kv_len: the same tokens).
  if (d.rope.style != TESSERA_ROPE_NONE) rope_new_tokens(d, qp, kp);
  // Rotated keys (and values): each head's row rotated before it is stored or attended.
  if (d.hadamard) hadamard(B * Lkv * Hk, D, d.hadamard, kp.data(), D, kp.data(), D);
  if (d.hadamard_v) hadamard(B * Lkv * Hk, Dv, d.hadamard, vp.data(), Dv, vp.data(), Dv);

  // The new keys and values appended to the cache, rounded to its type.
  if (cached) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hk = 0; hk < Hk; ++hk)
        for (int64_t t = 0; t < Lkv; ++t) {
          const int64_t slot = cache_row(d, b, hk, held(b) + t);
          const float* krow = &kp[size_t((b * Lkv + t) * Hk * D + hk * D)];
          const float* vrow = &vp[size_t((b * Lkv + t) * Hk * Dv + hk * Dv)];
          if (ct == TESSERA_Q8_0 || ct == TESSERA_Q4_0) {  // a row is whole blocks
            quantize(ct, D, krow, static_cast<char*>(d.k_cache) + storage_bytes(ct, slot * D));
            quantize(ct, Dv, vrow, static_cast<char*>(d.v_cache) + storage_bytes(ct, slot * Dv));
            continue;
          }
          for (int64_t c = 0; c < D; ++c) store_element(ct, d.k_cache, slot * D + c, krow[c]);
          for (int64_t c = 0; c < Dv; ++c) store_element(ct, d.v_cache, slot * Dv + c, vrow[c]);
        }
  }
  // Q, K, V and O gathered into packed [batch][head][seq][dim] arrays (K and V from the cache,
  // after appending, or the projections), for reference::attention with the layer's options.
  std::vector<float> q(size_t(B * Hq * Lq * D)), k(size_t(B * Hk * total * D)),
      v(size_t(B * Hk * total * Dv)), o(size_t(B * Hq * Lq * Dv));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t c = 0; c < D; ++c)
          q[((b * Hq + h) * Lq + i) * D + c] = qp[(b * Lq + i) * Hq * D + h * D + c];
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t j = 0; j < (paged(d) ? lens[size_t(b)] : total); ++j) {
        const int64_t slot = cached ? cache_row(d, b, hk, j) : 0;
        for (int64_t c = 0; c < D; ++c)
          k[((b * Hk + hk) * total + j) * D + c] = cached ? element(ct, d.k_cache, slot * D + c)
                                                          : kp[(b * Lkv + j) * Hk * D + hk * D + c];
        for (int64_t c = 0; c < Dv; ++c)
          v[((b * Hk + hk) * total + j) * Dv + c] = cached
                                                        ? element(ct, d.v_cache, slot * Dv + c)
                                                        : vp[(b * Lkv + j) * Hk * Dv + hk * Dv + c];
      }
  }
  tessera_attention_desc a{};
  a.batch = B, a.q_heads = Hq, a.kv_heads = Hk, a.q_len = Lq, a.kv_len = total;
  a.head_dim = D, a.value_dim = Dv, a.scale = d.scale;
  const int64_t qs[3] = {Hq * Lq * D, Lq * D, D}, ks[3] = {Hk * total * D, total * D, D},
                vs[3] = {Hk * total * Dv, total * Dv, Dv}, os[3] = {Hq * Lq * Dv, Lq * Dv, Dv};
  for (int i = 0; i < 3; ++i)
    a.q_stride[i] = qs[i], a.k_stride[i] = ks[i], a.v_stride[i] = vs[i], a.o_stride[i] = os[i];
  a.causal = d.causal, a.align = d.align;
  a.window_left = d.window_left, a.window_right = d.window_right;
  a.kv_lens = paged(d) ? lens.data() : d.kv_lens, a.bias = d.bias, a.mask = d.mask;
  for (int i = 0; i < 4; ++i)
    a.bias_stride[i] = d.bias_stride[i], a.mask_stride[i] = d.mask_stride[i];
  a.alibi_slopes = d.alibi_slopes, a.softcap = d.softcap, a.lse = d.lse, a.sinks = d.sinks;
  a.k_type = a.v_type = TESSERA_F32;
  // The queries rotated as the keys were (then rounded for a block-type cache); the output rows
  // rotated back below.
  if (d.hadamard) hadamard(B * Hq * Lq, D, d.hadamard, q.data(), D, q.data(), D);
  if (cached && (ct == TESSERA_Q8_0 || ct == TESSERA_Q4_0)) {
    // Scores against a block-type cache use the queries rounded to q8_0 (tessera.h); the cache's
    // values are read dequantized.
    std::vector<uint8_t> blocks(storage_bytes(TESSERA_Q8_0, int64_t(q.size())));
    quantize(TESSERA_Q8_0, int64_t(q.size()), q.data(), blocks.data());
    dequantize(TESSERA_Q8_0, int64_t(q.size()), blocks.data(), q.data());
  }
  attention(a, q.data(), k.data(), v.data(), o.data());
  if (d.hadamard_v) hadamard(B * Hq * Lq, Dv, d.hadamard, o.data(), Dv, o.data(), Dv);

  // Heads concatenated per token, then the output projection.
  std::vector<float> attn(size_t(B * Lq * Hq * Dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t c = 0; c < Dv; ++c)
          attn[(b * Lq + i) * Hq * Dv + h * Dv + c] = o[((b * Hq + h) * Lq + i) * Dv + c];
  const auto y = project(B * Lq, Hq * Dv, d.out_dim, attn.data(), d.weight_type, d.w_o, d.b_o);
  for (size_t i = 0; i < y.size(); ++i) out[i] = y[i];
}

void mha_forward(const tessera_mha_desc& d, const float* x_q, const float* x_kv, float* out) {
  mha_forward(d, x_q, x_kv, x_kv, out);
}

}  // namespace tessera::reference
