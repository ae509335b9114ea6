// The layers: Bahdanau additive attention (seed example, split form, reference) and the
// multi-head attention layer (reference, GQA, biases, and KV-cache decoding equal to prefill).
#include "tessera/layers.hpp"

#include <cmath>

#include "data/seed_examples.inc"
#include "tessera/reference.hpp"
#include "tessera/softmax.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace layers_test {

namespace {

using tessera::Status;

class Layers : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Layers);

// Seed notebook 003: scores printed as [4.35790943 5.92373433 4.18673175 2.11437202
// 0.95767155] and the context vector printed below; layer_1's first 16 rows are W_enc.
TEST_P(Layers, SeedBahdanauExample) {
  const float* w_enc = seed_data::kLayer1;
  const float* w_dec = seed_data::kLayer1 + 16 * 10;
  float context[16], weights[5];
  ASSERT_EQ(tessera::additive_attention(5, 16, 16, 10, seed_data::kEnc, seed_data::kDec, w_enc,
                                        w_dec, seed_data::kLayer2, context, weights),
            Status::ok)
      << tessera::last_error();
  const float scores[5] = {4.35790943f, 5.92373433f, 4.18673175f, 2.11437202f, 0.95767155f};
  float alpha[5];
  ASSERT_EQ(tessera::softmax(1, 5, scores, 5, alpha, 5), Status::ok);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(weights[j], alpha[j], 2e-6f) << j;
  const float printed[16] = {-0.63514569f, 0.04917298f,  -0.43930867f, -0.9268003f,
                             1.01903919f,  -0.43181409f, 0.13365099f,  -0.84746874f,
                             -0.37572203f, 0.18279832f,  -0.90452701f, 0.17872958f,
                             -0.58015282f, -0.58294027f, -0.75457577f, 1.32985756f};
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(context[c], printed[c], 5e-6f) << c;
}

// The split and one-shot forms against each other and the reference (the mutants' tester).
TEST_P(Layers, AdditiveSplitEqualsOneShotAndReference) { testers::additive_ops(); }

// v = -inf against tanh values of both signs gives scores -inf, +inf and NaN: a NaN score makes
// the state's context and weights NaN even beside a +inf score (which alone takes all the mass,
// shared equally), in the step, the batched step and the reference alike.
TEST_P(Layers, AdditiveNanScoreBesideInfiniteScoreIsNan) {
  const float enc[3 * 2] = {1, 2, 3, 4, 5, 6}, dec[1] = {0}, w_dec[2] = {0, 0};
  const float v[2] = {-tt::kInf, -tt::kInf};
  for (const bool with_nan : {true, false}) {
    // Row 0 scores -inf, row 1 +inf, row 2 NaN (or +inf).
    const float keys[3 * 2] = {1, 1, -1, -1, -1, with_nan ? 1.0f : -1.0f};
    float ctx[2], w[3], bctx[2], bw[3], rctx[2], rw[3];
    ASSERT_EQ(tessera::additive_attention_step(3, 2, 1, 2, enc, keys, dec, w_dec, v, ctx, w),
              Status::ok);
    ASSERT_EQ(tessera::additive_attention_batch(1, 3, 2, 1, 2, enc, keys, nullptr, dec, w_dec, v,
                                                bctx, bw),
              Status::ok);
    tessera::reference::additive_attention_step(3, 2, 1, 2, enc, keys, dec, w_dec, v, rctx, rw);
    const float want_w[3] = {with_nan ? tt::kNaN : 0.0f, with_nan ? tt::kNaN : 0.5f,
                             with_nan ? tt::kNaN : 0.5f};
    const float want_ctx[2] = {with_nan ? tt::kNaN : 4.0f, with_nan ? tt::kNaN : 5.0f};
    const auto same = [](float a, float b) { return std::isnan(b) ? std::isnan(a) : a == b; };
    for (const float* got : {w, bw, rw})
      for (int j = 0; j < 3; ++j) EXPECT_TRUE(same(got[j], want_w[j])) << j << ": " << got[j];
    for (const float* got : {ctx, bctx, rctx})
      for (int c = 0; c < 2; ++c) EXPECT_TRUE(same(got[c], want_ctx[c])) << c << ": " << got[c];
  }
}

struct MhaWeights {
  std::vector<float> wq, bq, wk, bk, wv, bv, wo, bo;
  MhaWeights(const tessera::MhaDesc& d, uint32_t seed) {
    const float s = 0.3f;
    wq = tt::random_vec(d.q_in_dim * d.q_heads * d.head_dim, seed, -s, s);
    wk = tt::random_vec(d.kv_in_dim * d.kv_heads * d.head_dim, seed + 1, -s, s);
    wv = tt::random_vec(d.kv_in_dim * d.kv_heads * d.value_dim, seed + 2, -s, s);
    wo = tt::random_vec(d.q_heads * d.value_dim * d.out_dim, seed + 3, -s, s);
    bq = tt::random_vec(d.q_heads * d.head_dim, seed + 4);
    bk = tt::random_vec(d.kv_heads * d.head_dim, seed + 5);
    bv = tt::random_vec(d.kv_heads * d.value_dim, seed + 6);
    bo = tt::random_vec(d.out_dim, seed + 7);
  }
  void attach(tessera::MhaDesc& d, bool biases) const {
    d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
    d.b_q = biases ? bq.data() : nullptr, d.b_k = biases ? bk.data() : nullptr;
    d.b_v = biases ? bv.data() : nullptr, d.b_o = biases ? bo.data() : nullptr;
  }
};

TEST_P(Layers, MhaMatchesReference) {
  for (int variant = 0; variant < 4; ++variant) {
    tessera::MhaDesc d;
    ASSERT_EQ(tessera::mha_desc_init(d, 2, 11, variant == 3 ? 19 : 11, 32, 4), Status::ok);
    if (variant >= 1) d.kv_heads = 2;  // GQA
    if (variant == 2) d.value_dim = 6, d.out_dim = 20, d.causal = 1, d.window_left = 4;
    if (variant == 3) d.kv_in_dim = 12, d.q_in_dim = 9;  // cross attention
    MhaWeights w(d, 10 + variant);
    w.attach(d, variant != 1);
    const auto xq = tt::random_vec(d.batch * d.q_len * d.q_in_dim, 1);
    const auto xkv = variant == 3 ? tt::random_vec(d.batch * d.kv_len * d.kv_in_dim, 2) : xq;
    std::vector<float> out(d.batch * d.q_len * d.out_dim, tt::kNaN), ref(out.size());
    size_t bytes = 0;
    ASSERT_EQ(tessera::mha_workspace_size(d, bytes), Status::ok);
    std::vector<char> ws(bytes);
    ASSERT_EQ(tessera::mha_forward(d, xq.data(), xkv.data(), out.data(), ws.data(), ws.size()),
              Status::ok)
        << tessera::last_error();
    tessera::reference::mha_forward(d, xq.data(), xkv.data(), ref.data());
    EXPECT_LE(tt::rel_err(out, ref), 1e-5) << "variant " << variant;
  }
}

// The cached path against reference::mha_forward with caches: a cache already holding tokens
// (random, as a previous call left them), then 1 or 4 new tokens appended; GQA, biases, causal
// with a window, value_dim != head_dim. Both the output and the appended cache rows compared.
TEST_P(Layers, MhaKvCacheMatchesReference) {
  for (int64_t step : {1, 4}) {
    tessera::MhaDesc d;
    ASSERT_EQ(tessera::mha_desc_init(d, 2, step, step, 24, 4), Status::ok);
    d.kv_heads = 2, d.value_dim = 5, d.causal = 1, d.window_left = 6;
    MhaWeights w(d, 21);
    w.attach(d, true);
    const int64_t cap = 16, held = 9;
    std::vector<float> kc = tt::random_vec(size_t(2 * 2 * cap * 6), 4);
    std::vector<float> vc = tt::random_vec(size_t(2 * 2 * cap * 5), 5);
    auto ref_kc = kc, ref_vc = vc;
    d.cache_capacity = cap, d.cache_len = held;
    const auto x = tt::random_vec(size_t(2 * step * 24), 6);
    std::vector<float> out(size_t(2 * step * 24), tt::kNaN), ref(out.size());
    d.k_cache = kc.data(), d.v_cache = vc.data();
    ASSERT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::ok)
        << tessera::last_error();
    d.k_cache = ref_kc.data(), d.v_cache = ref_vc.data();
    tessera::reference::mha_forward(d, x.data(), x.data(), ref.data());
    EXPECT_LE(tt::rel_err(out, ref), 1e-5) << "step " << step;
    EXPECT_LE(tt::rel_err(kc, ref_kc), 1e-5) << "step " << step;
    EXPECT_LE(tt::rel_err(vc, ref_vc), 1e-5) << "step " << step;
  }
}

// Decoding with a KV cache (prefill of 5 tokens, then one token at a time) gives, for each new
// token, the same output as causal self-attention over the whole sequence.
TEST_P(Layers, MhaKvCacheDecodeEqualsFullCausal) {
  const int64_t T = 12, P = 5, M = 24, H = 4, Hk = 2;
  tessera::MhaDesc full;
  ASSERT_EQ(tessera::mha_desc_init(full, 2, T, T, M, H), Status::ok);
  full.kv_heads = Hk;
  full.causal = 1;
  MhaWeights w(full, 3);
  w.attach(full, true);
  const auto x = tt::random_vec(2 * T * M, 7);
  std::vector<float> want(2 * T * M);
  ASSERT_EQ(tessera::mha_forward(full, x.data(), x.data(), want.data()), Status::ok);

  const int64_t D = M / H;
  std::vector<float> kc(2 * Hk * T * D, tt::kNaN), vc(kc.size(), tt::kNaN);
  for (int64_t pos = 0; pos < T;) {
    const int64_t step = pos == 0 ? P : 1;
    tessera::MhaDesc d = full;
    d.q_len = d.kv_len = step;
    d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = T, d.cache_len = pos;
    std::vector<float> xs(2 * step * M), out(2 * step * M);
    for (int64_t b = 0; b < 2; ++b) std::copy_n(&x[(b * T + pos) * M], step * M, &xs[b * step * M]);
    ASSERT_EQ(tessera::mha_forward(d, xs.data(), xs.data(), out.data()), Status::ok)
        << tessera::last_error();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < step * M; ++i)
        EXPECT_NEAR(out[b * step * M + i], want[(b * T + pos) * M + i], 1e-5f)
            << "batch " << b << " position " << pos + i / M;
    pos += step;
  }
}

}  // namespace

namespace {

// Seed notebook 004 is a one-head attention layer with projections: x W_Q, x W_K, x W_V
// (the notebook's weights), scale 1/sqrt(3); with W_o = I the layer prints the notebook's output.
TEST_P(Layers, SeedFourWordExampleAsMhaLayer) {
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 4, 4, 3, 1), Status::ok);
  const float identity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  d.w_q = seed_data::kWq, d.w_k = seed_data::kWk, d.w_v = seed_data::kWv, d.w_o = identity;
  float out[12];
  ASSERT_EQ(tessera::mha_forward(d, seed_data::kWords, seed_data::kWords, out), Status::ok)
      << tessera::last_error();
  const float printed[12] = {0.98522025f, 1.74174051f, 0.75652026f, 0.90965265f,
                             1.40965265f, 0.5f,        0.99851226f, 1.75849334f,
                             0.75998108f, 0.99560386f, 1.90407309f, 0.90846923f};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(out[i], printed[i], 2e-6f) << i;
}

// The Bahdanau seed through the split API: keys once, then the decoder step.
TEST_P(Layers, SeedBahdanauExampleKeysThenStep) {
  float keys[5 * 10], context[16];
  ASSERT_EQ(tessera::additive_keys(5, 16, 10, seed_data::kEnc, seed_data::kLayer1, keys),
            Status::ok);
  ASSERT_EQ(tessera::additive_attention_step(5, 16, 16, 10, seed_data::kEnc, keys, seed_data::kDec,
                                             seed_data::kLayer1 + 160, seed_data::kLayer2, context,
                                             nullptr),
            Status::ok);
  const float printed[16] = {-0.63514569f, 0.04917298f,  -0.43930867f, -0.9268003f,
                             1.01903919f,  -0.43181409f, 0.13365099f,  -0.84746874f,
                             -0.37572203f, 0.18279832f,  -0.90452701f, 0.17872958f,
                             -0.58015282f, -0.58294027f, -0.75457577f, 1.32985756f};
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(context[c], printed[c], 5e-6f) << c;
}

}  // namespace

}  // namespace layers_test
