// The multi-head attention layer with block-type weights (q8_0, q4_0, stored out x in), one-shot
// and prepared, against reference::mha_forward on the same stored weights (its projections
// round each input row to q8_0 as the layer's do): GQA, biases, a causal window, a float32 and
// a q8_0 cache holding some rows, one and several new tokens; the layer's checks of the block
// dimensions, naming the field and writing nothing.
#include <cstring>
#include <vector>

#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace quant_layer_test {

namespace {

using tessera::Status;
namespace ref = tessera::reference;

class QuantWeightsLayer : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(QuantWeightsLayer);

// rows x in values quantized along in (a Linear weight, out x in).
std::vector<uint8_t> weights(tessera_dtype t, int64_t rows, int64_t in, uint32_t seed) {
  const auto f = tt::random_vec(size_t(rows * in), seed, -0.3f, 0.3f);
  std::vector<uint8_t> w(ref::storage_bytes(t, rows * in));
  ref::quantize(t, rows * in, f.data(), w.data());
  return w;
}

std::vector<uint8_t> cache(tessera_dtype t, int64_t values, uint32_t seed) {
  const auto f = tt::random_vec(size_t(values), seed);
  std::vector<uint8_t> c(ref::storage_bytes(t, values));
  if (t == TESSERA_F32)
    std::memcpy(c.data(), f.data(), c.size());
  else
    ref::quantize(t, values, f.data(), c.data());
  return c;
}

void run_case(tessera_dtype wt, tessera_dtype ct, int64_t step, bool prepared, uint32_t seed) {
  constexpr int64_t B = 2, M = 64, Hq = 4, Hk = 2, D = 32, cap = 24, held = 9;
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, B, step, step, M, Hq), Status::ok);
  d.kv_heads = Hk, d.head_dim = D, d.value_dim = D, d.causal = 1, d.window_left = 12;
  d.weight_type = wt, d.cache_type = ct;
  const auto wq = weights(wt, Hq * D, M, seed), wk = weights(wt, Hk * D, M, seed + 1);
  const auto wv = weights(wt, Hk * D, M, seed + 2), wo = weights(wt, M, Hq * D, seed + 3);
  const auto bq = tt::random_vec(Hq * D, seed + 4), bk = tt::random_vec(Hk * D, seed + 5);
  const auto bv = tt::random_vec(Hk * D, seed + 6), bo = tt::random_vec(M, seed + 7);
  d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
  d.b_q = bq.data(), d.b_k = bk.data(), d.b_v = bv.data(), d.b_o = bo.data();
  auto kc = cache(ct, B * Hk * cap * D, seed + 8), vc = cache(ct, B * Hk * cap * D, seed + 9);
  const auto kc0 = kc, vc0 = vc;
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = cap, d.cache_len = held;
  const auto x = tt::random_vec(size_t(B * step * M), seed + 10);
  std::vector<float> out(size_t(B * step * M), tt::kNaN), want(out.size());
  if (prepared) {
    tessera::MhaLayer layer;
    ASSERT_EQ(layer.init(d), Status::ok) << tessera::last_error();
    tessera::MhaDesc call = d;
    call.w_q = call.w_k = call.w_v = call.w_o = nullptr;
    ASSERT_EQ(layer.forward(call, x.data(), x.data(), x.data(), out.data()), Status::ok)
        << tessera::last_error();
  } else {
    ASSERT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::ok)
        << tessera::last_error();
  }
  // The reference over the cache as the layer left it (the appended rows checked through the
  // output: a wrong row changes it), and the appended rows against the reference's own.
  auto rk = kc0, rv = vc0;
  tessera::MhaDesc r = d;
  r.k_cache = rk.data(), r.v_cache = rv.data();
  ref::mha_forward(r, x.data(), x.data(), want.data());
  if (ct == TESSERA_F32) {
    EXPECT_LE(tt::rel_err(reinterpret_cast<const float*>(kc.data()),
                          reinterpret_cast<const float*>(rk.data()), kc.size() / 4),
              1e-5);
  }
  auto left_k = kc, left_v = vc;
  r.k_cache = left_k.data(), r.v_cache = left_v.data();
  r.kv_len = 0, r.cache_len = held + step;
  // (kv_len 0 keeps the queries' projections: q_len stays step)
  ref::mha_forward(r, x.data(), x.data(), want.data());
  EXPECT_LE(tt::rel_err(out, want), 1e-5);
}

TEST_P(QuantWeightsLayer, BlockWeightsAgainstTheReference) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  uint32_t seed = 70;
  for (tessera_dtype wt : {TESSERA_Q8_0, TESSERA_Q4_0})
    for (tessera_dtype ct : {TESSERA_F32, TESSERA_Q8_0})
      for (int64_t step : {1, 4})
        for (bool prepared : {false, true}) {
          SCOPED_TRACE(testing::Message() << "weights " << wt << " cache " << ct << " step " << step
                                          << (prepared ? " prepared" : " one-shot"));
          run_case(wt, ct, step, prepared, seed);
          seed += 11;
          if (HasFailure()) return;
        }
}

// Float32 weights quantized at creation (prepared_weight_type) give the layer created from the
// same blocks, bit for bit: the transpose rounded as tessera_convert rounds it.
TEST_P(QuantWeightsLayer, QuantizedAtCreationFromFloat32) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  constexpr int64_t M = 64, H = 2, D = 32, T = 3;
  for (tessera_dtype t : {TESSERA_Q8_0, TESSERA_Q4_0}) {
    tessera::MhaDesc f;
    ASSERT_EQ(tessera::mha_desc_init(f, 1, T, T, M, H), Status::ok);
    f.causal = 1;
    std::vector<float> w[4];
    std::vector<uint8_t> q[4];
    const void** fp[4] = {&f.w_q, &f.w_k, &f.w_v, &f.w_o};
    for (int i = 0; i < 4; ++i) {  // in x out = M x M (head_dim 32, two heads)
      w[i] = tt::random_vec(size_t(M * H * D), uint32_t(20 + i), -0.3f, 0.3f);
      std::vector<float> tr(w[i].size());
      for (int64_t p = 0; p < M; ++p)
        for (int64_t c = 0; c < H * D; ++c) tr[size_t(c * M + p)] = w[i][size_t(p * H * D + c)];
      q[i].resize(ref::storage_bytes(t, int64_t(tr.size())));
      ref::quantize(t, int64_t(tr.size()), tr.data(), q[i].data());
      *fp[i] = w[i].data();
    }
    tessera::MhaDesc b = f;
    b.weight_type = t;
    b.w_q = q[0].data(), b.w_k = q[1].data(), b.w_v = q[2].data(), b.w_o = q[3].data();
    f.prepared_weight_type = t;
    tessera::MhaLayer from_f32, from_blocks;
    ASSERT_EQ(from_f32.init(f), Status::ok) << tessera::last_error();
    ASSERT_EQ(from_blocks.init(b), Status::ok) << tessera::last_error();
    const auto x = tt::random_vec(size_t(T * M), 31);
    std::vector<float> o1(x.size(), tt::kNaN), o2(x.size(), tt::kNaN);
    tessera::MhaDesc call = f;
    call.w_q = call.w_k = call.w_v = call.w_o = nullptr;
    ASSERT_EQ(from_f32.forward(call, x.data(), x.data(), x.data(), o1.data()), Status::ok);
    ASSERT_EQ(from_blocks.forward(call, x.data(), x.data(), x.data(), o2.data()), Status::ok);
    EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.size() * 4), 0) << t;
  }
  tessera::MhaDesc bad;
  ASSERT_EQ(tessera::mha_desc_init(bad, 1, 1, 1, M, H), Status::ok);
  const auto w = tt::random_vec(size_t(M * M), 3);
  bad.w_q = bad.w_k = bad.w_v = bad.w_o = w.data();
  bad.weight_type = TESSERA_F16, bad.prepared_weight_type = TESSERA_Q8_0;
  tessera::MhaLayer layer;
  EXPECT_EQ(layer.init(bad), Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("prepared_weight_type"), std::string::npos);
  EXPECT_FALSE(layer.ready());
}

TEST_P(QuantWeightsLayer, RejectsDimensionsThatAreNotWholeBlocks) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 1, 1, 48, 2), Status::ok);  // head_dim 24
  d.weight_type = TESSERA_Q8_0;
  const auto w = weights(TESSERA_Q8_0, 64, 64, 1);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  const auto x = tt::random_vec(48, 2);
  std::vector<float> out(48, 7.0f);
  EXPECT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("desc->q_in_dim"), std::string::npos)
      << tessera::last_error();
  for (float v : out) ASSERT_EQ(v, 7.0f);
  tessera::MhaLayer layer;
  EXPECT_EQ(layer.init(d), Status::invalid_argument);
  EXPECT_FALSE(layer.ready());
}

}  // namespace

}  // namespace quant_layer_test
