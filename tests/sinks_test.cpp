// Attention sinks: a logit per query head that joins every query's softmax as a key with a zero
// value row. Against the reference on every path (packed prefill over many tiles, few-row
// decode, split-KV decode), every K/V type and every table; a query with no visible key; the
// layer's option; bad sinks rejected with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_tester.hpp"
#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace sinks_test {

namespace {

using tessera::Status;
constexpr tessera_align BR = TESSERA_ALIGN_BOTTOM_RIGHT;

class Sinks : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Sinks);

TEST_P(Sinks, EveryPathAndKvTypeAgainstTheReference) {
  struct Types {
    tessera_dtype k, v;
  };
  std::vector<Types> types = {{TESSERA_F32, TESSERA_F32}, {TESSERA_F16, TESSERA_BF16}};
  if (tt::block_types_built()) types.push_back({TESSERA_Q8_0, TESSERA_Q8_0});
  if (tt::block_types_built()) types.push_back({TESSERA_Q4_0, TESSERA_F16});
  uint32_t seed = 900;
  for (const Types& ty : types) {
    SCOPED_TRACE(testing::Message() << "k " << ty.k << " v " << ty.v);
    // prefill, causal with kv_lens (some queries see nothing)
    AttentionTester(2, 8, 2, 37, 53, 64, 64)
        .kv_types(ty.k, ty.v)
        .causal(BR)
        .with_kv_lens()
        .with_sinks()
        .with_lse()
        .test(1e-5, seed++);
    // many tiles, a mask
    AttentionTester(1, 4, 4, 130, 300, 64, 32)
        .kv_types(ty.k, ty.v)
        .with_mask()
        .with_sinks()
        .with_lse()
        .test(1e-5, seed++);
    // one-token decode in one tile, GQA
    AttentionTester(2, 8, 2, 1, 300, 64, 64)
        .kv_types(ty.k, ty.v)
        .with_sinks()
        .with_lse()
        .test(1e-5, seed++);
    // split-KV decode: the sink once, after the chunks' merge
    AttentionTester(2, 8, 2, 3, 1500, 64, 64)
        .kv_types(ty.k, ty.v)
        .causal(BR)
        .with_kv_lens()
        .with_sinks()
        .with_lse()
        .test(1e-5, seed++);
    if (HasFatalFailure()) return;
  }
}

// No visible key: O is zero and lse is the sink's logit (-inf where there is none).
TEST_P(Sinks, AQueryWithNoVisibleKeyHasTheSinksLse) {
  AttentionTester t(2, 2, 1, 4, 600, 16, 16);
  auto& p = t.with_lse().with_sinks().build();
  const int32_t lens[2] = {600, 0};
  p.d.kv_lens = lens;
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i) {
      for (int c = 0; c < 16; ++c) EXPECT_EQ(p.o[size_t(((2 + h) * 4 + i) * 16 + c)], 0.0f);
      EXPECT_EQ(p.lse[size_t((2 + h) * 4 + i)], p.sinks[size_t(h)]);
    }
}

// The sink is a key: the same attention with one more key whose score is the sink (a zero key
// row and the sink as its bias) and whose value row is zero.
TEST_P(Sinks, EqualsOneMoreKeyWithAZeroValue) {
  const int64_t H = 4, L = 5, N = 70, D = 16;
  AttentionTester t(1, H, H, L, N, D, D);
  auto& p = t.with_sinks().with_lse().build(77);
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  tessera::AttentionDesc e;
  ASSERT_EQ(tessera::attention_desc_init(e, 1, H, H, L, N + 1, D, D), Status::ok);
  std::vector<float> k(size_t(H * (N + 1) * D), 0.0f), v(k.size(), 0.0f);
  std::vector<float> bias(size_t(H * L * (N + 1)), 0.0f), o(size_t(H * L * D)), lse(size_t(H * L));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < N * D; ++j) {
      k[size_t(h * (N + 1) * D + j)] = p.k[size_t(h * N * D + j)];
      v[size_t(h * (N + 1) * D + j)] = p.v[size_t(h * N * D + j)];
    }
    for (int64_t i = 0; i < L; ++i) bias[size_t((h * L + i) * (N + 1) + N)] = p.sinks[size_t(h)];
  }
  e.bias = bias.data();
  e.bias_stride[0] = H * L * (N + 1), e.bias_stride[1] = L * (N + 1), e.bias_stride[2] = N + 1;
  e.bias_stride[3] = 1;
  e.lse = lse.data();
  ASSERT_EQ(tessera::attention(e, p.q.data(), k.data(), v.data(), o.data()), Status::ok);
  EXPECT_LE(tt::rel_err(p.o, o), 1e-5);
  EXPECT_LE(tt::rel_err(p.lse, lse), 1e-5);
}

TEST(SinksApi, RejectsNaNAndPlusInfinityAndWritesNothing) {
  AttentionTester t(1, 2, 2, 3, 5, 8, 8);
  auto& p = t.with_lse().build();
  for (const float bad : {tt::kNaN, tt::kInf}) {
    const float sinks[2] = {0.5f, bad};
    p.d.sinks = sinks;
    std::vector<float> o(p.o.size(), 7.0f);
    EXPECT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), o.data()),
              Status::invalid_argument);
    EXPECT_NE(std::string(tessera::last_error()).find("desc->sinks[1]"), std::string::npos)
        << tessera::last_error();
    for (float x : o) ASSERT_EQ(x, 7.0f);
  }
}

// The layer passes its sinks to the attention: a decode step on a cache against the reference.
TEST_P(Sinks, TheLayersOptionAgainstTheReference) {
  const int64_t M = 32, Hq = 4, Hk = 2, D = 8, cap = 20, held = 11;
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 2, 1, 1, M, Hq), Status::ok);
  d.kv_heads = Hk;
  const auto wq = tt::random_vec(size_t(M * Hq * D), 1, -0.3f, 0.3f);
  const auto wk = tt::random_vec(size_t(M * Hk * D), 2, -0.3f, 0.3f);
  const auto wv = tt::random_vec(size_t(M * Hk * D), 3, -0.3f, 0.3f);
  const auto wo = tt::random_vec(size_t(Hq * D * M), 4, -0.3f, 0.3f);
  d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
  auto kc = tt::random_vec(size_t(2 * Hk * cap * D), 5), vc = tt::random_vec(kc.size(), 6);
  auto rk = kc, rv = vc;
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = cap, d.cache_len = held;
  const float sinks[Hq] = {1.5f, -0.5f, 3.0f, -tt::kInf};
  d.sinks = sinks;
  const auto x = tt::random_vec(size_t(2 * M), 7);
  std::vector<float> out(size_t(2 * M), tt::kNaN), want(out.size());
  ASSERT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::ok)
      << tessera::last_error();
  tessera::MhaDesc r = d;
  r.k_cache = rk.data(), r.v_cache = rv.data();
  tessera::reference::mha_forward(r, x.data(), x.data(), want.data());
  EXPECT_LE(tt::rel_err(out, want), 1e-5);
  r.sinks = nullptr;  // and the sinks matter
  tessera::reference::mha_forward(r, x.data(), x.data(), want.data());
  EXPECT_GT(tt::rel_err(out, want), 1e-2);
}

}  // namespace

}  // namespace sinks_test
