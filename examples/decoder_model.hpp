// The Llama-style decoder of examples/decoder.cpp as a class, shared with the benchmark's
// model/decode and model/prefill rows (bench/bench_model.cpp). A stack of blocks
//   h = x + Attention(RMSNorm(x)),  x' = h + FFN(RMSNorm(h)),  FFN = W_down (silu(W_gate) * W_up)
// on the library's prepared layers (tessera_mha_layer with rotary positions, GQA and a KV cache;
// tessera_norm with the residual add fused into the second norm; tessera_ffn), random weights
// of any type, each packed once at load.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tessera/tessera.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace decoder {

// The read loop's buffer: floats set to 1, 2 MB aligned and advised as huge pages where the OS
// gives them, as the library's prepared weights are (a buffer of 4 KB pages would measure the
// TLB misses of a stream, which the weights no longer pay).
class ReadBuffer {
 public:
  explicit ReadBuffer(size_t floats) {
    const size_t huge = size_t(2) << 20, bytes = (floats * sizeof(float) + huge - 1) / huge * huge;
    data_ = static_cast<float*>(std::aligned_alloc(huge, bytes));
    if (!data_) return;
#ifdef MADV_HUGEPAGE
    madvise(data_, bytes, MADV_HUGEPAGE);  // advice only
#endif
    n_ = floats;
    std::fill(data_, data_ + n_, 1.0f);
  }
  ~ReadBuffer() { std::free(data_); }
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  const float* data() const { return data_; }
  size_t size() const { return n_; }  // 0 when the allocation failed

 private:
  float* data_ = nullptr;
  size_t n_ = 0;
};

struct Shape {
  int64_t model = 256, layers = 2, heads = 8, kv_heads = 2, mlp = 512;
  int64_t capacity = 48;  // cache positions
  int64_t max_rows = 32;  // tokens a pass takes at most
  tessera_dtype weights = TESSERA_F16, cache = TESSERA_F16;
};

// n random weights of type t in [-s, s] (float32 rounded by tessera_convert).
inline std::vector<char> random_weights(int64_t n, float s, tessera_dtype t, uint32_t seed) {
  std::vector<float> f(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : f) x = x * 1664525u + 1013904223u, v = s * (float(x >> 8) / 8388608.0f - 1.0f);
  std::vector<char> out(tessera_dtype_size(t, n));
  if (tessera_convert(TESSERA_F32, t, n, f.data(), out.data()) != TESSERA_OK) out.clear();
  return out;
}

class Model {
 public:
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model() {
    for (Block& b : blocks_) tessera_mha_destroy(b.attn), tessera_ffn_destroy(b.ffn);
    std::free(ws_);
  }

  // Builds every block; TESSERA_OK or the failing call's status (tessera_last_error says why).
  tessera_status build(const Shape& s) {
    s_ = s;
    const int64_t M = s.model, hd = M / s.heads;
    tessera_status st = tessera_mha_desc_init(&d_, 1, 1, 1, M, s.heads);
    if (st != TESSERA_OK) return st;
    d_.kv_heads = s.kv_heads, d_.causal = 1, d_.weight_type = s.weights, d_.cache_type = s.cache;
    d_.rope.style = TESSERA_ROPE_NEOX, d_.rope.theta = 500000.0f;
    d_.cache_capacity = s.capacity;
    blocks_.resize(size_t(s.layers));
    const float sc = 1.0f / std::sqrt(float(M)), s_down = 1.0f / std::sqrt(float(s.mlp));
    for (int64_t l = 0; l < s.layers && st == TESSERA_OK; ++l)
      st = build_block(blocks_[size_t(l)], uint32_t(10 * l), M, hd, sc, s_down);
    if (st != TESSERA_OK) return st;
    x_.assign(size_t(s.max_rows * M), 0.0f), xn_ = attn_ = x_;
    // One workspace for every call: the longest pass's, or a step at the last position's.
    size_t a = 0, b = 0;
    d_.q_len = d_.kv_len = s.max_rows, d_.cache_len = 0;
    set_cache(blocks_[0]);
    if ((st = tessera_mha_layer_workspace_size(blocks_[0].attn, &d_, &a)) != TESSERA_OK) return st;
    d_.q_len = d_.kv_len = 1, d_.cache_len = s.capacity - 1;
    if ((st = tessera_mha_layer_workspace_size(blocks_[0].attn, &d_, &b)) != TESSERA_OK) return st;
    ws_bytes_ = std::max({a, b, tessera_ffn_workspace_size(blocks_[0].ffn, s.max_rows)});
    ws_ = std::aligned_alloc(64, (ws_bytes_ + 63) / 64 * 64);
    return ws_ ? TESSERA_OK : TESSERA_OUT_OF_MEMORY;
  }

  // One pass of n tokens at positions [pos, pos + n) through every block; x (n rows) in place.
  tessera_status pass(int64_t n, int64_t pos) {
    d_.q_len = d_.kv_len = n, d_.cache_len = pos;
    const int64_t M = s_.model;
    for (Block& b : blocks_) {
      tessera_status st = tessera_norm(TESSERA_NORM_RMS, n, M, x_.data(), M, nullptr, 0,
                                       b.norm1.data(), nullptr, 1e-5f, xn_.data(), M);
      set_cache(b);
      if (st == TESSERA_OK)
        st = tessera_mha_layer_forward(b.attn, &d_, xn_.data(), xn_.data(), xn_.data(),
                                       attn_.data(), ws_, ws_bytes_);
      // h = x + attention, and its norm, in one pass
      if (st == TESSERA_OK)
        st = tessera_norm(TESSERA_NORM_RMS, n, M, x_.data(), M, attn_.data(), M, b.norm2.data(),
                          nullptr, 1e-5f, xn_.data(), M);
      if (st == TESSERA_OK)
        st = tessera_ffn_forward(b.ffn, n, xn_.data(), M, 1.0f, x_.data(), M, ws_, ws_bytes_);
      if (st != TESSERA_OK) return st;
    }
    return TESSERA_OK;
  }

  // Random inputs in the first n rows.
  void fill_input(int64_t n) {
    uint32_t r = 12345;
    for (int64_t i = 0; i < n * s_.model; ++i)
      r = r * 1664525u + 1013904223u, x_[size_t(i)] = float(r >> 8) / 8388608.0f - 1.0f;
  }
  // Row `row`'s output, normalised, as the next token's input in row 0.
  tessera_status feed_back(int64_t row) {
    const std::vector<float> ones(size_t(s_.model), 1.0f);
    return tessera_norm(TESSERA_NORM_RMS, 1, s_.model, x_.data() + row * s_.model, s_.model,
                        nullptr, 0, ones.data(), nullptr, 1e-5f, x_.data(), s_.model);
  }
  const std::vector<float>& x() const { return x_; }

  double weight_bytes() const { return weight_bytes_; }
  // Bytes of K and V one cached position holds over all layers.
  double cache_row_bytes() const {
    return 2.0 * double(s_.layers) *
           double(tessera_dtype_size(s_.cache, s_.kv_heads * (s_.model / s_.heads)));
  }
  // What a decode step at `keys` cached positions reads: every weight once, and the cache.
  double step_bytes(double keys) const { return weight_bytes_ + cache_row_bytes() * keys; }

 private:
  struct Block {
    tessera_mha_layer* attn = nullptr;
    tessera_ffn* ffn = nullptr;
    std::vector<char> k_cache, v_cache;
    std::vector<float> norm1, norm2;
  };

  tessera_status build_block(Block& b, uint32_t seed, int64_t M, int64_t hd, float sc,
                             float s_down) {
    const tessera_dtype t = s_.weights;
    const auto wq = random_weights(M * M, sc, t, seed + 1);
    const auto wk = random_weights(M * s_.kv_heads * hd, sc, t, seed + 2);
    const auto wv = random_weights(M * s_.kv_heads * hd, sc, t, seed + 3);
    const auto wo = random_weights(M * M, sc, t, seed + 4);
    d_.w_q = wq.data(), d_.w_k = wk.data(), d_.w_v = wv.data(), d_.w_o = wo.data();
    tessera_status st = tessera_mha_create(&d_, &b.attn);
    d_.w_q = d_.w_k = d_.w_v = d_.w_o = nullptr;
    if (st != TESSERA_OK) return st;
    const auto wg = random_weights(s_.mlp * M, sc, t, seed + 5);
    const auto wu = random_weights(s_.mlp * M, sc, t, seed + 6);
    const auto wd = random_weights(M * s_.mlp, s_down, t, seed + 7);
    const tessera_ffn_desc fd{M,         s_.mlp,    TESSERA_ACT_SILU, 1,       t,      wg.data(),
                              wu.data(), wd.data(), nullptr,          nullptr, nullptr};
    if ((st = tessera_ffn_create(&fd, &b.ffn)) != TESSERA_OK) return st;
    weight_bytes_ +=
        double(wq.size() + wk.size() + wv.size() + wo.size() + wg.size() + wu.size() + wd.size());
    b.k_cache.assign(tessera_dtype_size(s_.cache, s_.kv_heads * s_.capacity * hd), 0);
    b.v_cache.assign(b.k_cache.size(), 0);
    b.norm1.assign(size_t(M), 1.0f), b.norm2.assign(size_t(M), 1.0f);
    return TESSERA_OK;
  }
  void set_cache(Block& b) { d_.k_cache = b.k_cache.data(), d_.v_cache = b.v_cache.data(); }

  Shape s_;
  tessera_mha_desc d_{};
  std::vector<Block> blocks_;
  std::vector<float> x_, xn_, attn_;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  double weight_bytes_ = 0;
};

}  // namespace decoder
