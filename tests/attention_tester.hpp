// AttentionTester: builds one attention problem (shape, layout and every descriptor option),
// runs it through the public API and through the reference, and returns both.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "tessera/attention.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

struct AttentionProblem {
  tessera::AttentionDesc d{};
  std::vector<float> q, k, v, o, lse;
  std::vector<uint16_t> k16, v16;  // k and v rounded to desc.k_type / v_type when those are 16-bit
  std::vector<uint8_t> kq, vq;     // or quantized, when those are block types
  static bool block(tessera_dtype t) { return t == TESSERA_Q8_0 || t == TESSERA_Q4_0; }
  const void* k_data() const {
    return d.k_type == TESSERA_F32 ? (const void*)k.data()
           : block(d.k_type)       ? (const void*)kq.data()
                                   : k16.data();
  }
  const void* v_data() const {
    return d.v_type == TESSERA_F32 ? (const void*)v.data()
           : block(d.v_type)       ? (const void*)vq.data()
                                   : v16.data();
  }
  // The queries the scores use: q, rounded to q8_0 row by row (and widened back) when K is a
  // block type (tessera.h).
  std::vector<float> scored_q() const {
    if (!block(d.k_type) && !d.hadamard) return q;
    std::vector<float> out(q.size());
    if (d.hadamard) {  // rotated as the keys were (rows of head_dim, contiguous)
      tessera::reference::hadamard(int64_t(q.size()) / d.head_dim, d.head_dim, d.hadamard, q.data(),
                                   d.head_dim, out.data(), d.head_dim);
      if (!block(d.k_type)) return out;
    } else {
      out = q;
    }
    std::vector<uint8_t> blocks(tessera::reference::storage_bytes(TESSERA_Q8_0, int64_t(q.size())));
    tessera::reference::quantize(TESSERA_Q8_0, int64_t(q.size()), out.data(), blocks.data());
    tessera::reference::dequantize(TESSERA_Q8_0, int64_t(q.size()), blocks.data(), out.data());
    return out;
  }
  std::vector<float> bias;
  std::vector<uint8_t> mask;
  std::vector<int32_t> kv_lens;
  std::vector<float> slopes;
  std::vector<float> sinks;
  std::vector<int32_t> table;  // paged: the block table
};

class AttentionTester {
 public:
  AttentionTester(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                  int64_t head_dim, int64_t value_dim) {
    EXPECT_EQ(tessera::attention_desc_init(p_.d, batch, q_heads, kv_heads, q_len, kv_len, head_dim,
                                           value_dim),
              tessera::Status::ok)
        << tessera::last_error();
  }
  AttentionTester& causal(tessera_align a) {
    p_.d.causal = 1;
    p_.d.align = a;
    return *this;
  }
  AttentionTester& align(tessera_align a) {
    p_.d.align = a;
    return *this;
  }
  AttentionTester& window(int64_t l, int64_t r) {
    p_.d.window_left = l;
    p_.d.window_right = r;
    return *this;
  }
  AttentionTester& scale(float s) {
    p_.d.scale = s;
    return *this;
  }
  AttentionTester& hadamard(int64_t n, bool values) {
    p_.d.hadamard = n;
    p_.d.hadamard_v = values ? 1 : 0;
    return *this;
  }
  AttentionTester& softcap(float s) {
    p_.d.softcap = s;
    return *this;
  }
  // K and V stored as these types (f32, f16 or bf16).
  AttentionTester& kv_types(tessera_dtype k, tessera_dtype v) {
    p_.d.k_type = k;
    p_.d.v_type = v;
    return *this;
  }
  AttentionTester& bshd() {
    bshd_ = true;
    return *this;
  }
  AttentionTester& with_lse() {
    lse_ = true;
    return *this;
  }
  AttentionTester& with_kv_lens() {
    kv_lens_ = true;
    return *this;
  }
  AttentionTester& with_bias(bool broadcast_heads) {
    bias_ = broadcast_heads ? 2 : 1;
    return *this;
  }
  AttentionTester& with_mask() {
    mask_ = true;
    return *this;
  }
  AttentionTester& with_alibi() {
    alibi_ = true;
    return *this;
  }
  // A sink logit per query head in [-2, 4] (the last head's -inf: none).
  AttentionTester& with_sinks() {
    sinks_ = true;
    return *this;
  }

  // K and V in pools of pages of `page` rows, through a block table: each batch's pages in a
  // shuffled order among spare pages of NaN (a block type's: of 1e4), the table's entries past
  // a batch's valid keys -1; none of them may be read. runs: the pool head-major
  // ([head][page][row]) and the pages shuffled in runs of three that lie one after another
  // (which the readers may take as one).
  AttentionTester& paged(int64_t page, bool runs = false) {
    page_ = page, runs_ = runs;
    return *this;
  }

  // Fills inputs (seeded), then returns the problem ready to run.
  AttentionProblem& build(uint32_t seed = 1) {
    auto& d = p_.d;
    if (bshd_) {  // [batch][seq][head][dim]
      auto set = [](int64_t* s, int64_t heads, int64_t len, int64_t dim) {
        s[0] = len * heads * dim, s[1] = dim, s[2] = heads * dim;
      };
      set(d.q_stride, d.q_heads, d.q_len, d.head_dim);
      set(d.k_stride, d.kv_heads, d.kv_len, d.head_dim);
      set(d.v_stride, d.kv_heads, d.kv_len, d.value_dim);
      set(d.o_stride, d.q_heads, d.q_len, d.value_dim);
    }
    p_.q = tt::random_vec(size_t(d.batch * d.q_heads * d.q_len * d.head_dim), seed, -2, 2);
    // K/V rows: batch x kv_len, or paged: the pool's num_pages x page
    const int64_t kv_rows = page_ ? pool_pages() * page_ : d.batch * d.kv_len;
    p_.k = tt::random_vec(size_t(kv_rows * d.kv_heads * d.head_dim), seed + 1, -2, 2);
    p_.v = tt::random_vec(size_t(kv_rows * d.kv_heads * d.value_dim), seed + 2);
    if (page_) page_pool(seed);
    auto narrow = [](tessera_dtype t, const std::vector<float>& x, std::vector<uint16_t>& h,
                     std::vector<uint8_t>& bq) {
      h.clear();
      bq.clear();
      if (AttentionProblem::block(t)) {
        bq.resize(tessera::reference::storage_bytes(t, int64_t(x.size())));
        tessera::reference::quantize(t, int64_t(x.size()), x.data(), bq.data());
        return;
      }
      for (float f : x)
        if (t != TESSERA_F32)
          h.push_back(t == TESSERA_F16 ? tessera::reference::f32_to_f16(f)
                                       : tessera::reference::f32_to_bf16(f));
    };
    narrow(d.k_type, p_.k, p_.k16, p_.kq);
    narrow(d.v_type, p_.v, p_.v16, p_.vq);
    p_.o.assign(size_t(d.batch * d.q_heads * d.q_len * d.value_dim), tt::kNaN);
    if (lse_) {
      p_.lse.assign(size_t(d.batch * d.q_heads * d.q_len), tt::kNaN);
      d.lse = p_.lse.data();
    }
    std::mt19937 gen(seed + 3);
    if (kv_lens_) {
      for (int64_t b = 0; b < d.batch; ++b) p_.kv_lens.push_back(int32_t(gen() % (d.kv_len + 1)));
      d.kv_lens = p_.kv_lens.data();
      for (int64_t b = 0; page_ && b < d.batch; ++b)  // entries past the valid keys' pages
        for (int64_t i = (p_.kv_lens[size_t(b)] + page_ - 1) / page_; i < d.block_table_stride; ++i)
          p_.table[size_t(b * d.block_table_stride + i)] = -1;
    }
    const int64_t qk = d.q_len * d.kv_len;
    if (bias_) {
      const int64_t heads = bias_ == 2 ? 1 : d.q_heads;
      p_.bias = tt::random_vec(size_t(d.batch * heads * qk), seed + 4, -3, 3);
      for (size_t i = 0; i < p_.bias.size(); i += 7) p_.bias[i] = -tt::kInf;
      d.bias = p_.bias.data();
      d.bias_stride[0] = heads * qk, d.bias_stride[1] = bias_ == 2 ? 0 : qk;
      d.bias_stride[2] = d.kv_len, d.bias_stride[3] = 1;
    }
    if (mask_) {  // one mask for all heads, per batch
      for (int64_t i = 0; i < d.batch * qk; ++i) p_.mask.push_back(gen() % 4 != 0);
      d.mask = p_.mask.data();
      d.mask_stride[0] = qk, d.mask_stride[1] = 0, d.mask_stride[2] = d.kv_len,
      d.mask_stride[3] = 1;
    }
    if (alibi_) {
      for (int64_t h = 0; h < d.q_heads; ++h) p_.slopes.push_back(std::pow(2.0f, -float(h + 1)));
      d.alibi_slopes = p_.slopes.data();
    }
    if (sinks_) {
      p_.sinks = tt::random_vec(size_t(d.q_heads), seed + 5, -2, 4);
      if (d.q_heads > 1) p_.sinks.back() = -tt::kInf;
      d.sinks = p_.sinks.data();
    }
    return p_;
  }

  // Runs the API and the reference; EXPECTs agreement within `tol` (the norm of docs/design.md)
  // on O and lse.
  void test(double tol = 1e-5, uint32_t seed = 1) {
    AttentionProblem& p = build(seed);
    ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k_data(), p.v_data(), p.o.data()),
              tessera::Status::ok)
        << tessera::last_error();
    std::vector<float> ref_o(p.o.size(), tt::kNaN), ref_lse(p.lse.size(), tt::kNaN);
    tessera::AttentionDesc rd = p.d;
    rd.lse = lse_ ? ref_lse.data() : nullptr;
    // 16-bit and block-type K/V go to the reference as the float32 values they widen to
    // (exactly the same numbers, converted once rather than at every read of a row).
    std::vector<float> kf, vf;
    const void* rk = p.k_data();
    const void* rv = p.v_data();
    auto widen = [](tessera_dtype& t, const void*& data, size_t n, std::vector<float>& f) {
      if (t == TESSERA_F32) return;
      f.resize(n);
      if (AttentionProblem::block(t))  // (whole blocks: each scale converted once)
        tessera::reference::dequantize(t, int64_t(n), data, f.data());
      else
        for (size_t i = 0; i < n; ++i) f[i] = tessera::reference::element(t, data, int64_t(i));
      t = TESSERA_F32, data = f.data();
    };
    widen(rd.k_type, rk, p.k.size(), kf);
    widen(rd.v_type, rv, p.v.size(), vf);
    // The queries as the kernels score them (rotated, rounded for a block-type K), and the
    // output rows rotated back here: the reference is given f32 K/V, which it would not round
    // for.
    rd.hadamard = 0, rd.hadamard_v = 0;
    tessera::reference::attention(rd, p.scored_q().data(), rk, rv, ref_o.data());
    if (p.d.hadamard_v)
      for (size_t r = 0; r < ref_o.size() / size_t(p.d.value_dim); ++r)
        if (std::isfinite(ref_o[r * size_t(p.d.value_dim)]))
          tessera::reference::hadamard(1, p.d.value_dim, p.d.hadamard,
                                       ref_o.data() + r * size_t(p.d.value_dim), p.d.value_dim,
                                       ref_o.data() + r * size_t(p.d.value_dim), p.d.value_dim);
    EXPECT_LE(tt::rel_err(p.o, ref_o), tol);
    if (lse_) {
      EXPECT_LE(tt::rel_err(p.lse, ref_lse), tol);
    }
    for (float x : p.o) ASSERT_FALSE(std::isnan(x)) << "an output element was not written";
  }

 private:
  int64_t pool_pages() const { return p_.d.batch * ((p_.d.kv_len + page_ - 1) / page_) + 2; }
  // The pool's layout, a shuffled block table, and the spare pages poisoned.
  void page_pool(uint32_t seed) {
    auto& d = p_.d;
    const int64_t pages = pool_pages(), per_batch = (d.kv_len + page_ - 1) / page_;
    auto set = [&](int64_t* st, int64_t dim) {
      if (bshd_)
        st[0] = page_ * d.kv_heads * dim, st[1] = dim, st[2] = d.kv_heads * dim;
      else if (runs_)
        st[0] = page_ * dim, st[1] = pages * page_ * dim, st[2] = dim;
      else
        st[0] = d.kv_heads * page_ * dim, st[1] = page_ * dim, st[2] = dim;
    };
    set(d.k_stride, d.head_dim);
    set(d.v_stride, d.value_dim);
    const int64_t run = runs_ ? 3 : 1;  // pages a shuffled unit
    std::vector<int32_t> units(static_cast<size_t>((pages + run - 1) / run)), order;
    for (size_t i = 0; i < units.size(); ++i) units[i] = int32_t(i);
    std::shuffle(units.begin(), units.end(), std::mt19937(seed + 6));
    for (const int32_t u : units)
      for (int64_t i = u * run; i < std::min(pages, (u + 1) * run); ++i)
        order.push_back(int32_t(i));
    p_.table.assign(order.begin(), order.begin() + d.batch * per_batch);
    const float poison =
        AttentionProblem::block(d.k_type) || AttentionProblem::block(d.v_type) ? 1e4f : tt::kNaN;
    // A spare page's rows: every head's, side by side or (runs) one run per head.
    const int64_t heads = runs_ ? d.kv_heads : 1, per = runs_ ? page_ : d.kv_heads * page_;
    for (size_t s = size_t(d.batch * per_batch); s < order.size(); ++s)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t at = d.k_stride[0] * order[s] + (runs_ ? d.k_stride[1] * h : 0);
        const int64_t av = d.v_stride[0] * order[s] + (runs_ ? d.v_stride[1] * h : 0);
        std::fill_n(p_.k.begin() + at, per * d.head_dim, poison);
        std::fill_n(p_.v.begin() + av, per * d.value_dim, poison);
      }
    d.block_table = p_.table.data();
    d.block_table_stride = per_batch;
    d.page_size = page_;
    d.num_pages = pages;
  }

  AttentionProblem p_;
  int64_t page_ = 0;
  bool bshd_ = false, lse_ = false, kv_lens_ = false, mask_ = false, alibi_ = false, runs_ = false;
  bool sinks_ = false;
  int bias_ = 0;
};
