// The prepared multi-head attention layer (tessera_mha_create): every attention option at the
// layer against reference::mha_forward on odd sizes, GQA and cross attention, keys and values
// from different inputs, 16-bit weights, caches; its calls' checks.
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace mha_layer_test {

namespace {

using tessera::Status;

class MhaLayer : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(MhaLayer);

// One layer's weights, as float32 values and as stored in the layer's type.
struct Weights {
  std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
  std::vector<uint16_t> hq, hk, hv, ho;  // 16-bit copies, when the type asks for them
  Weights(tessera::MhaDesc& d, uint32_t seed) {
    const float s = 0.3f;
    wq = tt::random_vec(size_t(d.q_in_dim * d.q_heads * d.head_dim), seed, -s, s);
    wk = tt::random_vec(size_t(d.kv_in_dim * d.kv_heads * d.head_dim), seed + 1, -s, s);
    wv = tt::random_vec(size_t(d.kv_in_dim * d.kv_heads * d.value_dim), seed + 2, -s, s);
    wo = tt::random_vec(size_t(d.q_heads * d.value_dim * d.out_dim), seed + 3, -s, s);
    bq = tt::random_vec(size_t(d.q_heads * d.head_dim), seed + 4);
    bk = tt::random_vec(size_t(d.kv_heads * d.head_dim), seed + 5);
    bv = tt::random_vec(size_t(d.kv_heads * d.value_dim), seed + 6);
    bo = tt::random_vec(size_t(d.out_dim), seed + 7);
    d.b_q = bq.data(), d.b_k = bk.data(), d.b_v = bv.data(), d.b_o = bo.data();
    if (d.weight_type == TESSERA_F32) {
      d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
      return;
    }
    auto store = [&](const std::vector<float>& w, std::vector<uint16_t>& h) {
      h.resize(w.size());
      for (size_t i = 0; i < w.size(); ++i)
        tessera::reference::store_element(d.weight_type, h.data(), int64_t(i), w[i]);
      return h.data();
    };
    d.w_q = store(wq, hq), d.w_k = store(wk, hk), d.w_v = store(wv, hv), d.w_o = store(wo, ho);
  }
};

// The options one case turns on.
struct Options {
  bool kv_lens = false, mask = false, bias = false, alibi = false, softcap = false, lse = false;
  int causal = 0;
  tessera_align align = TESSERA_ALIGN_BOTTOM_RIGHT;
  int64_t window_left = -1, window_right = -1;
  bool two_inputs = false, cache = false, cross = false;
  int64_t kv_heads = 2;
  tessera_dtype weights = TESSERA_F32, cache_type = TESSERA_F32;
};

// The spacing of the values of type t at magnitude x (normal range; the smallest normal's below).
double type_ulp(tessera_dtype t, double x) {
  const int bits = t == TESSERA_F32 ? 23 : t == TESSERA_F16 ? 10 : 7;
  const int min_exp = t == TESSERA_F16 ? -14 : -126;
  return std::ldexp(1.0, std::max(std::ilogb(std::max(x, 1e-300)), min_exp) - bits);
}

// Runs the prepared layer (and the one-shot layer where it can express the call) and the
// reference on the same inputs; compares out, lse and the caches.
void run_case(int64_t q_len, int64_t kv_len, const Options& o, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "q_len " << q_len << " kv_len " << kv_len << " seed " << seed);
  const int64_t B = 2, M = 24, H = 4;
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, B, q_len, kv_len, M, H), Status::ok);
  d.kv_heads = o.kv_heads, d.value_dim = 5, d.weight_type = o.weights;
  if (o.cross) d.kv_in_dim = 11, d.out_dim = 7;
  Weights w(d, seed);
  const int64_t held = o.cache ? 7 : 0, keys = held + kv_len, cap = keys + 3;
  const auto xq = tt::random_vec(size_t(B * q_len * d.q_in_dim), seed + 10);
  const auto xk = tt::random_vec(size_t(B * kv_len * d.kv_in_dim), seed + 11);
  const auto xv = o.two_inputs ? tt::random_vec(xk.size(), seed + 12) : xk;
  d.causal = o.causal, d.align = o.align, d.window_left = o.window_left;
  d.window_right = o.window_right;
  std::vector<int32_t> lens(B);
  for (int64_t b = 0; b < B; ++b) lens[b] = int32_t(b == 0 ? keys : keys / 2);
  if (o.kv_lens) d.kv_lens = lens.data();
  std::vector<uint8_t> mask(size_t(B * q_len * keys));
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + 3) % 5 != 0;
  if (o.mask) {  // one mask per (batch, query, key), broadcast over heads
    d.mask = mask.data();
    d.mask_stride[0] = q_len * keys, d.mask_stride[1] = 0, d.mask_stride[2] = keys,
    d.mask_stride[3] = 1;
  }
  const auto bias = tt::random_vec(size_t(H * q_len * keys), seed + 13);
  if (o.bias) {  // per (head, query, key), broadcast over the batch
    d.bias = bias.data();
    d.bias_stride[0] = 0, d.bias_stride[1] = q_len * keys, d.bias_stride[2] = keys,
    d.bias_stride[3] = 1;
  }
  const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  if (o.alibi) d.alibi_slopes = slopes;
  if (o.softcap) d.softcap = 2.5f;
  std::vector<float> lse(size_t(B * H * q_len), tt::kNaN), ref_lse(lse.size(), tt::kNaN);
  if (o.lse) d.lse = lse.data();
  const size_t cache_elems = size_t(B * d.kv_heads * cap * 6);
  std::vector<uint16_t> kc(cache_elems * 2), vc(cache_elems * 2);  // room for float32 too
  if (o.cache) {
    d.cache_type = o.cache_type;
    for (size_t i = 0; i < cache_elems; ++i) {  // the rows a previous call left
      tessera::reference::store_element(o.cache_type, kc.data(), int64_t(i), float(i % 13) / 13);
      tessera::reference::store_element(o.cache_type, vc.data(), int64_t(i), float(i % 11) / 11);
    }
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = cap, d.cache_len = held;
  }
  const auto kc0 = kc, vc0 = vc;

  tessera::MhaLayer layer;
  ASSERT_EQ(layer.init(d), Status::ok) << tessera::last_error();
  size_t bytes = 0;
  ASSERT_EQ(layer.workspace_size(d, bytes), Status::ok) << tessera::last_error();
  std::vector<char> ws(bytes);
  std::vector<float> out(size_t(B * q_len * d.out_dim), tt::kNaN), ref(out.size());
  ASSERT_EQ(layer.forward(d, xq.data(), xk.data(), xv.data(), out.data(), ws.data(), ws.size()),
            Status::ok)
      << tessera::last_error();
  const auto got_kc = kc, got_vc = vc;

  tessera::MhaDesc r = d;
  kc = kc0, vc = vc0;
  r.lse = o.lse ? ref_lse.data() : nullptr;
  tessera::reference::mha_forward(r, xq.data(), xk.data(), xv.data(), ref.data());
  // 16-bit weights: both read the same stored values, so the bound is float32's.
  EXPECT_LE(tt::rel_err(out, ref), 2e-5);
  if (o.lse) {
    EXPECT_LE(tt::rel_err(lse, ref_lse), 2e-5);
  }
  if (o.cache) {
    // The rows appended: the layer's float32 projection rounded once to the cache type, the
    // reference's exact one rounded likewise. They differ by at most one spacing of the type
    // (the two may round to either side of a boundary) plus the float32 sum's own error (SGEMM's
    // bound over kv_in_dim inputs |x| <= 1, weights |w| <= 0.3, a bias |b| <= 1); the rows the
    // cache held, and those past the new ones, are the same bits in both.
    const double sum_error =
        2.0 * std::sqrt(double(d.kv_in_dim + 1)) * 0x1p-24 * (0.3 * double(d.kv_in_dim) + 1.0);
    for (const auto* caches : {&got_kc, &got_vc}) {
      const bool keys_ = caches == &got_kc;
      const auto& want = keys_ ? kc : vc;
      const int64_t dim = keys_ ? d.head_dim : d.value_dim;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < d.kv_heads; ++h)
          for (int64_t t = 0; t < cap; ++t)
            for (int64_t c = 0; c < dim; ++c) {
              const int64_t i = ((b * d.kv_heads + h) * cap + t) * dim + c;
              const double x = tessera::reference::element(o.cache_type, caches->data(), i);
              const double y = tessera::reference::element(o.cache_type, want.data(), i);
              const bool appended = t >= held && t < keys;
              const double bound =
                  appended
                      ? type_ulp(o.cache_type, std::max(std::fabs(x), std::fabs(y))) + sum_error
                      : 0.0;
              ASSERT_LE(std::fabs(x - y), bound)
                  << (keys_ ? "k_cache" : "v_cache") << " (" << b << ", " << h << ", " << t << ", "
                  << c << ")" << (appended ? " appended" : " not appended");
            }
    }
  }
  // The one-shot layer runs the same code on unpacked weights.
  if (!o.two_inputs) {
    kc = kc0, vc = vc0;
    std::vector<float> once(out.size(), tt::kNaN);
    ASSERT_EQ(tessera::mha_forward(d, xq.data(), xk.data(), once.data()), Status::ok)
        << tessera::last_error();
    EXPECT_LE(tt::rel_err(once, out), 2e-5);
  }
}

TEST_P(MhaLayer, EveryOptionMatchesReference) {
  const int64_t sizes[] = {1, 3, 17, 63, 65};
  uint32_t seed = 1;
  for (int option = 0; option < 13; ++option) {
    Options o;
    switch (option) {
      case 0:
        break;
      case 1:
        o.kv_lens = true;
        break;
      case 2:
        o.mask = true, o.causal = 1;
        break;
      case 3:
        o.bias = true, o.lse = true;
        break;
      case 4:
        o.alibi = true, o.causal = 1, o.align = TESSERA_ALIGN_TOP_LEFT;
        break;
      case 5:
        o.softcap = true, o.window_left = 4, o.causal = 1;
        break;
      case 6:
        o.two_inputs = true, o.cross = true, o.lse = true;
        break;
      case 7:
        o.kv_heads = 1, o.causal = 1, o.kv_lens = true, o.lse = true;
        break;
      case 8:
        o.weights = TESSERA_F16, o.mask = true, o.bias = true;
        break;
      case 9:
        o.cache = true, o.causal = 1, o.alibi = true, o.lse = true;
        break;
      case 10:
        o.cache = true, o.cache_type = TESSERA_BF16, o.weights = TESSERA_BF16, o.kv_lens = true;
        o.two_inputs = true, o.mask = true;
        break;
      case 11:
        o.window_left = 3, o.window_right = 2, o.bias = true;
        break;
      case 12:
        o.cache = true, o.cache_type = TESSERA_F16, o.window_right = 1, o.cross = true;
        break;
    }
    SCOPED_TRACE(testing::Message() << "option set " << option);
    for (int64_t q : sizes) {
      // Square, and a second kv_len from the list (bottom-right causal with more queries than
      // keys leaves the first queries none: part of the sweep).
      for (int64_t kv : {q, sizes[(seed + 2) % 5]}) {
        run_case(q, kv, o, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Token-by-token decoding with a prepared layer equals one causal prefill of the whole sequence
// (within float32's bound: the products of one and of many rows sum in different orders).
TEST_P(MhaLayer, DecodeEqualsPrefill) {
  const int64_t T = 17, P = 6, M = 24, H = 4;
  tessera::MhaDesc full;
  ASSERT_EQ(tessera::mha_desc_init(full, 2, T, T, M, H), Status::ok);
  full.kv_heads = 2, full.causal = 1;
  Weights w(full, 5);
  tessera::MhaLayer layer;
  ASSERT_EQ(layer.init(full), Status::ok) << tessera::last_error();
  const auto x = tt::random_vec(size_t(2 * T * M), 7);
  std::vector<float> want(x.size());
  ASSERT_EQ(layer.forward(full, x.data(), x.data(), x.data(), want.data()), Status::ok);
  std::vector<float> kc(size_t(2 * 2 * T * 6), tt::kNaN), vc(kc.size(), tt::kNaN);
  for (int64_t pos = 0; pos < T;) {
    const int64_t step = pos == 0 ? P : 1;
    tessera::MhaDesc d = full;
    d.w_q = d.w_k = d.w_v = d.w_o = nullptr;  // the layer holds them
    d.q_len = d.kv_len = step;
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = T, d.cache_len = pos;
    std::vector<float> xs(size_t(2 * step * M)), out(xs.size());
    for (int64_t b = 0; b < 2; ++b) std::copy_n(&x[(b * T + pos) * M], step * M, &xs[b * step * M]);
    ASSERT_EQ(layer.forward(d, xs.data(), xs.data(), xs.data(), out.data()), Status::ok)
        << tessera::last_error();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < step * M; ++i)
        ASSERT_NEAR(out[b * step * M + i], want[(b * T + pos) * M + i], 1e-5f)
            << "batch " << b << " position " << pos + i / M;
    pos += step;
  }
  // Past capacity: an error, naming it, with the cache and out as they were: a full cache, one
  // row short of the new rows, and several short; the same through the one-shot layer.
  for (const auto len_new : {std::array<int64_t, 2>{T, 1}, std::array<int64_t, 2>{T - 1, 2},
                             std::array<int64_t, 2>{T - 5, 6}, std::array<int64_t, 2>{0, T + 1}}) {
    tessera::MhaDesc d = full;
    d.w_q = d.w_k = d.w_v = d.w_o = nullptr;
    d.q_len = d.kv_len = len_new[1];
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = T, d.cache_len = len_new[0];
    const auto kc0 = kc, vc0 = vc;
    std::vector<float> out(size_t(2 * len_new[1] * M), 42.0f);
    EXPECT_EQ(layer.forward(d, x.data(), x.data(), x.data(), out.data()), Status::invalid_argument)
        << "cache_len " << len_new[0] << " + " << len_new[1];
    EXPECT_NE(std::strstr(tessera::last_error(), "cache_capacity"), nullptr)
        << tessera::last_error();
    tessera::MhaDesc one_shot = d;
    one_shot.w_q = w.wq.data(), one_shot.w_k = w.wk.data(), one_shot.w_v = w.wv.data();
    one_shot.w_o = w.wo.data();
    EXPECT_EQ(tessera::mha_forward(one_shot, x.data(), x.data(), out.data()),
              Status::invalid_argument);
    EXPECT_EQ(std::memcmp(kc.data(), kc0.data(), kc.size() * 4), 0);
    EXPECT_EQ(std::memcmp(vc.data(), vc0.data(), vc.size() * 4), 0);
    for (float f : out) ASSERT_EQ(f, 42.0f);
  }
}

// The weights are the layer's own copy: the caller's arrays may change or go.
TEST_P(MhaLayer, HoldsItsOwnWeights) {
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 3, 3, 16, 2), Status::ok);
  std::vector<float> want(3 * 16), got(want.size());
  const auto x = tt::random_vec(3 * 16, 3);
  tessera::MhaLayer layer;
  {
    Weights w(d, 9);
    ASSERT_EQ(tessera::mha_forward(d, x.data(), x.data(), want.data()), Status::ok);
    ASSERT_EQ(layer.init(d), Status::ok);
    std::fill(w.wq.begin(), w.wq.end(), 0.0f);
    std::fill(w.bo.begin(), w.bo.end(), 0.0f);
  }
  ASSERT_EQ(layer.forward(d, x.data(), x.data(), x.data(), got.data()), Status::ok);
  EXPECT_LE(tt::rel_err(got, want), 2e-6);
  tessera::MhaLayer moved = std::move(layer);
  EXPECT_FALSE(layer.ready());
  EXPECT_EQ(layer.forward(d, x.data(), x.data(), x.data(), got.data()), Status::invalid_argument);
  EXPECT_EQ(moved.forward(d, x.data(), x.data(), x.data(), got.data()), Status::ok);
}

// Float32 weights are packed for the table active at creation: under another table a call is
// refused, naming the layer, and writes nothing; back under its own it runs.
TEST_P(MhaLayer, RefusesAnotherKernelTable) {
  std::string other;
  for (const std::string& isa : tt::all_isas())
    if (isa != GetParam()) other = isa;
  if (other.empty()) GTEST_SKIP() << "one kernel table on this machine";
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 2, 2, 16, 2), Status::ok);
  Weights w(d, 4);
  tessera::MhaLayer layer;
  ASSERT_EQ(layer.init(d), Status::ok);
  const auto x = tt::random_vec(2 * 16, 5);
  std::vector<float> out(2 * 16, 42.0f);
  ASSERT_EQ(tessera::set_isa(other.c_str()), Status::ok);
  EXPECT_EQ(layer.forward(d, x.data(), x.data(), x.data(), out.data()), Status::invalid_argument);
  EXPECT_EQ(std::strncmp(tessera::last_error(), "layer", 5), 0) << tessera::last_error();
  for (float f : out) ASSERT_EQ(f, 42.0f);
  ASSERT_EQ(tessera::set_isa(GetParam().c_str()), Status::ok);
  EXPECT_EQ(layer.forward(d, x.data(), x.data(), x.data(), out.data()), Status::ok);
}

}  // namespace

}  // namespace mha_layer_test
