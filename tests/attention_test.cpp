// Fused attention: every descriptor option against the reference, the properties that pin the
// semantics down independently of the reference, and hand-computed and seed values.
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>

#include "attention_tester.hpp"
#include "data/seed_examples.inc"
#include "testers.hpp"

namespace attention_test {

namespace {

using tessera::Status;
constexpr tessera_align TL = TESSERA_ALIGN_TOP_LEFT;
constexpr tessera_align BR = TESSERA_ALIGN_BOTTOM_RIGHT;

class Attention : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Attention);

TEST_P(Attention, OddShapesAndHeadDims) {
  uint32_t seed = 1;
  for (int64_t d : {1, 8, 40, 64, 80, 128, 256})
    for (int64_t len : {1, 3, 17, 65}) {
      AttentionTester(1, 2, 1, len, (len * 5) % 67 + 1, d, d == 40 ? 24 : d)
          .with_lse()
          .test(1e-5, seed++);
      if (HasFatalFailure()) return;
    }
}

// Descriptor option `option` (0-9) of the lattice the option tests sweep.
void set_option(AttentionTester& t, int option) {
  switch (option) {
    case 0:
      t.causal(TL);
      break;
    case 1:
      t.causal(BR);
      break;
    case 2:
      t.window(5, 3).align(BR);
      break;
    case 3:
      t.causal(BR).window(7, -1).with_kv_lens();
      break;
    case 4:
      t.with_kv_lens();
      break;
    case 5:
      t.with_bias(false).causal(TL);
      break;
    case 6:
      t.with_bias(true).with_mask();
      break;
    case 7:
      t.with_alibi().causal(BR);
      break;
    case 8:
      t.softcap(5.0f).scale(0.3f);
      break;
    case 9:
      t.with_alibi().softcap(2.0f).with_mask().with_kv_lens().window(3, 3);
      break;
  }
}

void every_option() {
  uint32_t seed = 100;
  for (bool bshd : {false, true})
    for (int option = 0; option < 10; ++option)
      for (auto shape : {std::array<int64_t, 4>{17, 63, 2, 1}, std::array<int64_t, 4>{63, 17, 4, 2},
                         std::array<int64_t, 4>{65, 65, 3, 3}}) {
        AttentionTester t(2, shape[2], shape[3], shape[0], shape[1], 40, 24);
        if (bshd) t.bshd();
        set_option(t, option);
        if (seed % 2) t.with_lse();
        t.test(1e-5, seed++);
        if (::testing::Test::HasFatalFailure() || testers::mutant_rejected()) return;
      }
}

TEST_P(Attention, EveryOptionAgainstReference) { every_option(); }

// f16 and bf16 K/V: every option, both layouts, the decode (split-KV, few rows) and prefill
// (packed tiles) paths, against the reference run on the same 16-bit inputs, so the float32
// tolerance holds. `pairs`: how many of the four type pairs.
void half_precision_kv(size_t pairs = 4) {
  uint32_t seed = 700;
  constexpr tessera_dtype F32 = TESSERA_F32, F16 = TESSERA_F16, BF16 = TESSERA_BF16;
  const std::array<tessera_dtype, 2> all[] = {{F16, F16}, {BF16, BF16}, {F16, F32}, {F32, BF16}};
  for (size_t i = 0; i < pairs; ++i)
    for (int option = 0; option < 10; ++option)
      // q_len, kv_len, q_heads, kv_heads, head_dim, value_dim
      for (auto shape : {std::array<int64_t, 6>{1, 700, 8, 2, 64, 64},
                         std::array<int64_t, 6>{3, 300, 4, 1, 17, 33},
                         std::array<int64_t, 6>{65, 301, 2, 2, 40, 24}}) {
        AttentionTester t(2, shape[2], shape[3], shape[0], shape[1], shape[4], shape[5]);
        t.kv_types(all[i][0], all[i][1]);
        if (seed % 2) t.bshd();
        set_option(t, option);
        if (seed % 3 == 0) t.with_lse();
        t.test(1e-5, seed++);
        if (::testing::Test::HasFatalFailure() || testers::mutant_rejected()) return;
      }
}

TEST_P(Attention, HalfPrecisionKeysAndValues) { half_precision_kv(); }

// Top-left causal: query 0 sees only key 0, so O_0 = v_0 exactly.
TEST_P(Attention, CausalRowZeroIsFirstValue) {
  AttentionTester t(1, 1, 1, 9, 9, 16, 12);
  auto& p = t.causal(TL).build();
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  for (int c = 0; c < 12; ++c) EXPECT_NEAR(p.o[c], p.v[c], 1e-6f);
}

// GQA: 6 query heads on 2 KV heads equals MHA with each KV head repeated 3 times.
TEST_P(Attention, GqaEqualsRepeatedKv) {
  AttentionTester t(2, 6, 2, 19, 23, 16, 16);
  auto& p = t.causal(BR).build();
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  AttentionTester r(2, 6, 6, 19, 23, 16, 16);
  auto& pr = r.causal(BR).build();
  pr.q = p.q;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t i = 0; i < 23 * 16; ++i) {
        pr.k[(b * 6 + h) * 23 * 16 + i] = p.k[(b * 2 + h / 3) * 23 * 16 + i];
        pr.v[(b * 6 + h) * 23 * 16 + i] = p.v[(b * 2 + h / 3) * 23 * 16 + i];
      }
  ASSERT_EQ(tessera::attention(pr.d, pr.q.data(), pr.k.data(), pr.v.data(), pr.o.data()),
            Status::ok);
  EXPECT_LE(tt::rel_err(p.o, pr.o), 1e-6);
}

TEST_P(Attention, BottomRightEqualsTopLeftWhenSquare) {
  AttentionTester a(1, 2, 2, 33, 33, 24, 24), b(1, 2, 2, 33, 33, 24, 24);
  auto& pa = a.causal(TL).window(4, 2).with_alibi().build();
  auto& pb = b.causal(BR).window(4, 2).with_alibi().build();
  ASSERT_EQ(tessera::attention(pa.d, pa.q.data(), pa.k.data(), pa.v.data(), pa.o.data()),
            Status::ok);
  ASSERT_EQ(tessera::attention(pb.d, pb.q.data(), pb.k.data(), pb.v.data(), pb.o.data()),
            Status::ok);
  EXPECT_EQ(pa.o, pb.o);
}

// A query with no visible key: zeros in O and -inf in lse, never NaN. Bottom-right causal with
// more queries than keys hides every key from the first q_len - kv_len queries; kv_lens = 0 hides
// all of them.
TEST_P(Attention, NoVisibleKeyGivesZerosAndMinusInf) {
  AttentionTester t(2, 1, 1, 8, 5, 8, 8);
  auto& p = t.causal(BR).with_lse().build();
  const int32_t lens[2] = {5, 0};
  p.d.kv_lens = lens;
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  for (int64_t i = 0; i < 8; ++i) {
    const bool empty = i < 3;
    for (int c = 0; c < 8; ++c) {
      if (empty) {
        EXPECT_EQ(p.o[i * 8 + c], 0.0f);
      }
      EXPECT_EQ(p.o[64 + i * 8 + c], 0.0f);  // batch 1 has no keys at all
    }
    EXPECT_EQ(p.lse[i] == -tt::kInf, empty);
    EXPECT_EQ(p.lse[8 + i], -tt::kInf);
  }
}

TEST_P(Attention, MinusInfBiasEqualsKeepMask) {
  AttentionTester a(1, 2, 2, 13, 29, 16, 16), b(1, 2, 2, 13, 29, 16, 16);
  auto& pa = a.with_mask().with_lse().build();
  auto& pb = b.with_lse().build();
  std::vector<float> bias(13 * 29);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = pa.mask[i] ? 0.0f : -tt::kInf;
  pb.d.bias = bias.data();
  pb.d.bias_stride[0] = 0, pb.d.bias_stride[1] = 0, pb.d.bias_stride[2] = 29,
  pb.d.bias_stride[3] = 1;
  ASSERT_EQ(tessera::attention(pa.d, pa.q.data(), pa.k.data(), pa.v.data(), pa.o.data()),
            Status::ok);
  ASSERT_EQ(tessera::attention(pb.d, pb.q.data(), pb.k.data(), pb.v.data(), pb.o.data()),
            Status::ok);
  EXPECT_LE(tt::rel_err(pa.o, pb.o), 1e-6);
  EXPECT_LE(tt::rel_err(pa.lse, pb.lse), 1e-6);
}

TEST_P(Attention, KeyValuePermutationLeavesOutputUnchanged) {
  AttentionTester t(1, 1, 1, 11, 37, 24, 20);
  auto& p = t.build();
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
  std::vector<int> perm(37);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(5));
  std::vector<float> k2(p.k.size()), v2(p.v.size()), o2(p.o.size());
  for (int j = 0; j < 37; ++j) {
    std::copy_n(&p.k[perm[j] * 24], 24, &k2[j * 24]);
    std::copy_n(&p.v[perm[j] * 20], 20, &v2[j * 20]);
  }
  ASSERT_EQ(tessera::attention(p.d, p.q.data(), k2.data(), v2.data(), o2.data()), Status::ok);
  EXPECT_LE(tt::rel_err(p.o, o2), 1e-5);
}

TEST_P(Attention, BshdStridesGiveTheBhsdNumbers) {
  AttentionTester a(2, 4, 2, 15, 21, 16, 8), b(2, 4, 2, 15, 21, 16, 8);
  auto& pa = a.causal(BR).build();
  auto& pb = b.causal(BR).bshd().build();
  // Same logical tensors: transpose pa's [b][h][s][d] inputs into pb's [b][s][h][d].
  auto to_bshd = [](const std::vector<float>& x, std::vector<float>& y, int64_t heads, int64_t len,
                    int64_t dim) {
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < len; ++s)
          for (int64_t c = 0; c < dim; ++c)
            y[((n * len + s) * heads + h) * dim + c] = x[((n * heads + h) * len + s) * dim + c];
  };
  to_bshd(pa.q, pb.q, 4, 15, 16);
  to_bshd(pa.k, pb.k, 2, 21, 16);
  to_bshd(pa.v, pb.v, 2, 21, 8);
  ASSERT_EQ(tessera::attention(pa.d, pa.q.data(), pa.k.data(), pa.v.data(), pa.o.data()),
            Status::ok);
  ASSERT_EQ(tessera::attention(pb.d, pb.q.data(), pb.k.data(), pb.v.data(), pb.o.data()),
            Status::ok);
  std::vector<float> oa(pa.o.size());
  to_bshd(pa.o, oa, 4, 15, 8);
  EXPECT_EQ(oa, pb.o);
}

// Seed notebook 004: the four-word example, scores scaled by 1/sqrt(3), printed output.
TEST_P(Attention, SeedFourWordExample) {
  float q[12], k[12], v[12], o[12];
  auto matmul3 = [](const float* x, const float* w, float* y) {
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        y[i * 3 + j] = x[i * 3] * w[j] + x[i * 3 + 1] * w[3 + j] + x[i * 3 + 2] * w[6 + j];
  };
  matmul3(seed_data::kWords, seed_data::kWq, q);
  matmul3(seed_data::kWords, seed_data::kWk, k);
  matmul3(seed_data::kWords, seed_data::kWv, v);
  tessera::AttentionDesc d;
  ASSERT_EQ(tessera::attention_desc_init(d, 1, 1, 1, 4, 4, 3, 3), Status::ok);
  ASSERT_EQ(tessera::attention(d, q, k, v, o), Status::ok);  // scale 0: 1/sqrt(3)
  const float printed[12] = {0.98522025f, 1.74174051f, 0.75652026f, 0.90965265f,
                             1.40965265f, 0.5f,        0.99851226f, 1.75849334f,
                             0.75998108f, 0.99560386f, 1.90407309f, 0.90846923f};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(o[i], printed[i], 2e-6f) << i;
}

// Seed notebook 003's causal example, computed correctly (the notebook's DotProductAttention
// multiplies the scores by V without a softmax): q = [[1,0,0],[0,1,0]], k = [[1,2,3],[4,5,6]],
// v = [[0,1,0],[1,0,1]]. Row 0 sees key 0 only: v0. Row 1: scores [2, 5]/sqrt(3), weight of
// key 1 = 1/(1 + exp(-3/sqrt(3))) = 0.849697, so O1 = [0.849697, 0.150303, 0.849697].
TEST_P(Attention, SeedCausalExampleDoneRight) {
  const float q[] = {1, 0, 0, 0, 1, 0}, k[] = {1, 2, 3, 4, 5, 6}, v[] = {0, 1, 0, 1, 0, 1};
  float o[6], lse[2];
  tessera::AttentionDesc d;
  ASSERT_EQ(tessera::attention_desc_init(d, 1, 1, 1, 2, 2, 3, 3), Status::ok);
  d.causal = 1;
  d.lse = lse;
  ASSERT_EQ(tessera::attention(d, q, k, v, o), Status::ok);
  const float w = 1.0f / (1.0f + std::exp(-3.0f / std::sqrt(3.0f)));
  const float want[6] = {0, 1, 0, w, 1 - w, w};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(o[i], want[i], 1e-6f) << i;
  EXPECT_NEAR(lse[0], 1.0f / std::sqrt(3.0f), 1e-6f);
  EXPECT_NEAR(lse[1], std::log(std::exp(2 / std::sqrt(3.0f)) + std::exp(5 / std::sqrt(3.0f))),
              1e-5f);
}

}  // namespace

namespace {

// Several query blocks and key tiles (BK = 256), every structural mask, GQA stacking.
TEST_P(Attention, ManyTilesAgainstReference) {
  uint32_t seed = 300;
  for (int option = 0; option < 5; ++option) {
    AttentionTester t(1, 4, 2, 301, 700, 40, 24);
    if (option == 1) t.causal(TL);
    if (option == 2) t.causal(BR).with_kv_lens();
    if (option == 3) t.window(100, 20).align(BR);
    if (option == 4) t.with_alibi().with_mask().causal(BR);
    t.with_lse().test(1e-5, seed++);
    if (HasFatalFailure()) return;
  }
}

// Scores that climb from key tile to key tile (a bias ramp over the keys): by less than the
// lazy-rescale slack per tile (the running max stays, exps above 1), by more (it moves, O and l
// are rescaled), and both in one row (a ramp that steepens), on the prefill and decode paths.
TEST_P(Attention, RunningMaxClimbingAcrossTiles) {
  uint32_t seed = 350;
  for (int64_t q_len : {40, 3})
    for (float rise : {1.0f, 3.9f, 4.1f, 30.0f, -1.0f}) {
      AttentionTester t(1, 2, 2, q_len, 1300, 24, 16);
      auto& p = t.with_lse().with_bias(false).build(seed);
      for (int64_t r = 0; r < 2 * q_len; ++r)
        for (int64_t j = 0; j < 1300; ++j) {
          // rise per 256 keys; -1: a ramp steepening from 0.5 to 12 per tile.
          const float per_tile = rise > 0 ? rise : 0.5f + float(j / 256) * 2.5f;
          p.bias[size_t(r * 1300 + j)] = per_tile * float(j) / 256.0f;
        }
      std::vector<float> ref_o(p.o.size()), ref_lse(p.lse.size());
      tessera::AttentionDesc rd = p.d;
      rd.lse = ref_lse.data();
      tessera::reference::attention(rd, p.q.data(), p.k.data(), p.v.data(), ref_o.data());
      ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()),
                Status::ok);
      EXPECT_LE(tt::rel_err(p.o, ref_o), 1e-5) << q_len << " " << rise;
      EXPECT_LE(tt::rel_err(p.lse, ref_lse), 1e-5) << q_len << " " << rise;
      ++seed;
    }
}

// The split-KV decode path (q_len <= 8 against more than one 512-key chunk).
TEST_P(Attention, DecodeChunksAgainstReference) {
  uint32_t seed = 400;
  for (int64_t q_len : {1, 3, 8})
    for (int64_t kv_len : {513, 1500}) {
      AttentionTester t(2, 8, 2, q_len, kv_len, 64, 48);
      if (q_len == 3) t.causal(BR).with_kv_lens();
      if (q_len == 8) t.with_alibi().with_bias(true).window(700, -1).align(BR);
      t.with_lse().test(1e-5, seed++);
      if (HasFatalFailure()) return;
    }
}

// Few stacked rows (1..8: one query against groups of 1..8 heads): up to 4 take the wide P V
// kernels, whose widths (1, 2, 4, 8 vectors) depend on the rows, more the NR-column kernel;
// value dims that need every width, and a tail past the last whole vector, on both the
// one-tile and the split-KV paths.
TEST_P(Attention, FewRowsEveryValueWidth) {
  uint32_t seed = 450;
  for (int64_t group = 1; group <= 8; ++group)
    for (int64_t dv : {8, 24, 136, 256})
      for (int64_t kv_len : {300, 700}) {
        AttentionTester(1, group, 1, 1, kv_len, 32, dv).with_lse().test(1e-5, seed++);
        if (HasFatalFailure()) return;
      }
}

// A +inf bias: the reference shares the mass among the +inf keys; so must the fused path.
TEST_P(Attention, PlusInfinityBiasRows) {
  for (int64_t kv_len : {40, 600}) {
    AttentionTester t(1, 1, 1, 4, kv_len, 16, 16);
    auto& p = t.with_lse().build();
    std::vector<float> bias(size_t(4 * kv_len), 0.0f);
    bias[1 * kv_len + 3] = tt::kInf;
    bias[1 * kv_len + 7] = tt::kInf;
    p.d.bias = bias.data();
    p.d.bias_stride[0] = p.d.bias_stride[1] = 0, p.d.bias_stride[2] = kv_len,
    p.d.bias_stride[3] = 1;
    ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
    for (int c = 0; c < 16; ++c)
      EXPECT_NEAR(p.o[16 + c], 0.5f * (p.v[3 * 16 + c] + p.v[7 * 16 + c]), 1e-6f) << kv_len;
    EXPECT_EQ(p.lse[1], tt::kInf);
    EXPECT_TRUE(std::isfinite(p.lse[0]) && std::isfinite(p.lse[2]));
  }
}

// +inf scores on every path (packed prefill, few-row decode, split-KV decode merging chunks),
// in the first, a middle and the last key tile, the very last key alone (the last lane of the
// last tile), after finite mass, with a NaN in the same row, against the reference. (These rows
// once went to the reference at run time: O(L^2).)
void plus_infinity_scores() {
  struct Shape {
    int64_t q_heads, kv_heads, q_len, kv_len, first;  // first: row 0's case below
  };
  for (const Shape s : {Shape{2, 1, 100, 700, 0}, Shape{4, 2, 4, 1500, 1}, Shape{1, 1, 1, 3000, 1},
                        Shape{1, 1, 1, 2001, 4}, Shape{8, 1, 40, 300, 0}}) {
    AttentionTester t(1, s.q_heads, s.kv_heads, s.q_len, s.kv_len, 32, 24);
    auto& p = t.with_lse().build(77);
    const int64_t L = s.kv_len;
    std::vector<float> bias(size_t(s.q_len * L), 0.0f);
    for (int64_t i = 0; i < s.q_len; ++i) {
      float* row = bias.data() + i * L;
      switch ((i + s.first) % 5) {
        case 1:
          row[3] = row[L - 5] = tt::kInf;
          break;  // first and last tile
        case 2:
          row[L / 2] = tt::kInf;
          break;  // after finite mass
        case 3:
          row[5] = tt::kInf, row[L - 2] = tt::kNaN;  // a NaN later: the row is NaN
          break;
        case 4:
          row[L - 1] = tt::kInf;  // the last key alone
      }
    }
    p.d.bias = bias.data();
    p.d.bias_stride[0] = p.d.bias_stride[1] = 0, p.d.bias_stride[2] = L, p.d.bias_stride[3] = 1;
    ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok)
        << tessera::last_error();
    std::vector<float> ref_o(p.o.size()), ref_lse(p.lse.size());
    tessera::AttentionDesc rd = p.d;
    rd.lse = ref_lse.data();
    tessera::reference::attention(rd, p.q.data(), p.k.data(), p.v.data(), ref_o.data());
    EXPECT_LE(tt::rel_err(p.o, ref_o), 1e-5) << s.q_len << " x " << L;
    EXPECT_LE(tt::rel_err(p.lse, ref_lse), 1e-5) << s.q_len << " x " << L;
  }
}

TEST_P(Attention, PlusInfinityScoresOnEveryPath) { plus_infinity_scores(); }

// A query whose every score is NaN (a NaN in q) is a NaN row, on every path; it was once
// taken for a row that sees no key, and came back as zeros (found by tests/fuzz).
TEST_P(Attention, NaNQueryGivesNaNRow) {
  for (auto shape : {std::array<int64_t, 2>{1, 700}, std::array<int64_t, 2>{40, 300},
                     std::array<int64_t, 2>{3, 1}}) {
    AttentionTester t(1, 2, 1, shape[0], shape[1], 16, 16);
    auto& p = t.with_lse().build(5);
    p.q[3] = tt::kNaN;  // query 0 of head 0
    ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()), Status::ok);
    for (int c = 0; c < 16; ++c) EXPECT_TRUE(std::isnan(p.o[size_t(c)])) << shape[0];
    EXPECT_TRUE(std::isnan(p.lse[0])) << shape[0];
    EXPECT_FALSE(std::isnan(p.o[16])) << "the next row is untouched by the NaN";
  }
}

// Bitwise identical for 1, 2 and 8 threads on the prefill and decode paths. (The prefill's
// query blocks follow the thread count: 200 rows are one block for 1-2 threads, two for 8; a
// sliding window moves each block's first visible key.)
TEST_P(Attention, BitwiseIdenticalForAnyThreadCount) {
  for (auto shape : {std::array<int64_t, 3>{200, 600, 0}, std::array<int64_t, 3>{200, 600, 1},
                     std::array<int64_t, 3>{1, 3000, 0}, std::array<int64_t, 3>{5, 1100, 0}}) {
    AttentionTester t(2, 4, 2, shape[0], shape[1], 32, 32);
    t.causal(BR).with_lse();
    if (shape[2]) t.window(300, 0);
    auto& p = t.build();
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 8}) {
      std::fill(p.o.begin(), p.o.end(), 0.0f);
      tbb::task_arena arena(threads);
      arena.execute([&] {
        ASSERT_EQ(tessera::attention(p.d, p.q.data(), p.k.data(), p.v.data(), p.o.data()),
                  Status::ok);
      });
      std::vector<float> all = p.o;
      all.insert(all.end(), p.lse.begin(), p.lse.end());
      runs.push_back(all);
    }
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4), 0) << shape[0];
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * 4), 0) << shape[0];
  }
}

}  // namespace

}  // namespace attention_test

// +inf scores on every path, every option on both layouts, f16 K/V on the decode and prefill
// paths. The special rows come first: a mutant only they reject (the max kernel skipping the
// last key) is then rejected without running the rest.
void testers::attention_ops() {
  using namespace attention_test;
  plus_infinity_scores();
  if (!mutant_rejected()) every_option();
  if (!mutant_rejected()) half_precision_kv(1);
}
