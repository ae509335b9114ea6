// The Hadamard rotation of keys (and values): tessera_hadamard bit for bit against the reference,
// orthonormal and its own inverse, its argument checks; fused attention with `hadamard` set on
// every path and K/V type against the reference on the rotated queries; a rotated call equal to
// the unrotated one; and the point of it, 4-bit keys with outlier channels kept accurate.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_tester.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

namespace hadamard_test {

namespace {

namespace ref = tessera::reference;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

class Hadamard : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Hadamard);

TEST_P(Hadamard, MatchesTheReferenceBitForBitAndIsItsOwnInverse) {
  for (int64_t dim : {1, 2, 8, 96, 128, 256})
    for (int64_t n = 1; n <= dim; n *= 2) {
      if (dim % n) continue;
      SCOPED_TRACE(testing::Message() << "dim " << dim << " n " << n);
      const int64_t rows = 5, ld = dim + 3;
      const std::vector<float> x = tt::random_vec(size_t(rows * ld), uint32_t(dim + n), -4, 4);
      std::vector<float> got(x.size(), -7.0f), want(x.size(), -7.0f);
      ASSERT_EQ(tessera_hadamard(rows, dim, n, x.data(), ld, got.data(), ld), TESSERA_OK);
      ref::hadamard(rows, dim, n, x.data(), ld, want.data(), ld);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(bits(got[i]), bits(want[i])) << "element " << i;  // padding too
      std::vector<float> in_place = x;                              // y == x
      ASSERT_EQ(tessera_hadamard(rows, dim, n, in_place.data(), ld, in_place.data(), ld),
                TESSERA_OK);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dim; ++c)
          ASSERT_EQ(bits(in_place[size_t(r * ld + c)]), bits(want[size_t(r * ld + c)]));
      // Orthonormal: the norm of each block kept, and H H x = x, each to the rounding of
      // log2(n) butterfly levels and the scale (about (log2 n + 2) / 2 ulps of the block norm).
      std::vector<float> back(x.size());
      ASSERT_EQ(tessera_hadamard(rows, dim, n, got.data(), ld, back.data(), ld), TESSERA_OK);
      const double levels = std::log2(double(n)) + 2;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < dim; b += n) {
          double nx = 0, ny = 0, diff = 0;
          for (int64_t c = b; c < b + n; ++c) {
            const size_t i = size_t(r * ld + c);
            nx += double(x[i]) * x[i], ny += double(got[i]) * got[i];
            diff = std::max(diff, std::fabs(double(back[i]) - x[i]));
          }
          const double tol = 2 * levels * 0x1p-24 * std::sqrt(nx);
          EXPECT_NEAR(std::sqrt(ny), std::sqrt(nx), tol) << "row " << r << " block " << b;
          EXPECT_LE(diff, tol) << "row " << r << " block " << b;
        }
    }
}

TEST(HadamardArgs, RejectedWithTheArgumentNamedAndNothingWritten) {
  std::vector<float> x = tt::random_vec(64, 1), y(64, -7.0f);
  const auto rejected = [&](int64_t rows, int64_t dim, int64_t n, const float* xp, int64_t ldx,
                            float* yp, int64_t ldy, const char* name) {
    EXPECT_EQ(tessera_hadamard(rows, dim, n, xp, ldx, yp, ldy), TESSERA_INVALID_ARGUMENT) << name;
    EXPECT_NE(std::string(tessera_last_error()).find(name), std::string::npos)
        << tessera_last_error();
    for (float v : y) ASSERT_EQ(v, -7.0f) << name;
  };
  rejected(2, 32, 0, x.data(), 32, y.data(), 32, "n = 0");
  rejected(2, 32, 3, x.data(), 32, y.data(), 32, "n = 3");
  rejected(2, 24, 16, x.data(), 24, y.data(), 24, "n = 16");
  rejected(2, 32, 64, x.data(), 32, y.data(), 32, "n = 64");
  rejected(-1, 32, 8, x.data(), 32, y.data(), 32, "rows = -1");
  rejected(2, 0, 1, x.data(), 32, y.data(), 32, "dim = 0");
  rejected(2, 32, 8, x.data(), 31, y.data(), 32, "ldx = 31");
  rejected(2, 32, 8, x.data(), 32, y.data(), 16, "ldy = 16");
  rejected(2, 32, 8, nullptr, 32, y.data(), 32, "x is NULL");
  rejected(2, 32, 8, x.data(), 32, nullptr, 32, "y is NULL");
  rejected(2, 16, 8, y.data(), 16, y.data() + 8, 16, "overlaps x");  // not the same rows
  EXPECT_EQ(tessera_hadamard(0, 32, 8, nullptr, 32, nullptr, 32), TESSERA_OK);
}

TEST(HadamardArgs, AttentionRejectsARotationThatDoesNotDivideTheHead) {
  tessera_attention_desc d;
  ASSERT_EQ(tessera_attention_desc_init(&d, 1, 2, 1, 1, 64, 64, 48), TESSERA_OK);
  EXPECT_EQ(d.hadamard, 0);
  EXPECT_EQ(d.hadamard_v, 0);
  const std::vector<float> q(128, 0.5f), kv(64 * 64, 0.25f);
  std::vector<float> o(96, -7.0f);
  const auto rejected = [&](int64_t n, int values, const char* name) {
    d.hadamard = n, d.hadamard_v = values;
    EXPECT_EQ(tessera_attention(&d, q.data(), kv.data(), kv.data(), o.data()),
              TESSERA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tessera_last_error()).find(name), std::string::npos)
        << tessera_last_error();
    for (float v : o) ASSERT_EQ(v, -7.0f) << name;
  };
  rejected(3, 0, "desc->hadamard");
  rejected(128, 0, "desc->hadamard");
  rejected(-4, 0, "desc->hadamard");
  rejected(0, 1, "desc->hadamard_v");
  rejected(32, 1, "desc->hadamard_v");  // 32 does not divide value_dim 48
  rejected(16, 2, "desc->hadamard_v");
  d.hadamard = 16, d.hadamard_v = 1;
  EXPECT_EQ(tessera_attention(&d, q.data(), kv.data(), kv.data(), o.data()), TESSERA_OK);
}

TEST(HadamardArgs, TheLayerRejectsItBeforeWritingAnything) {
  tessera_mha_desc d;
  ASSERT_EQ(tessera_mha_desc_init(&d, 1, 2, 2, 64, 2), TESSERA_OK);  // head_dim 32
  const std::vector<float> w(64 * 64, 0.01f), x(2 * 64, 0.5f);
  std::vector<float> out(2 * 64, -7.0f), kc(2 * 4 * 32, -7.0f), vc(kc.size(), -7.0f);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 4;
  d.hadamard = 64;
  EXPECT_EQ(tessera_mha_forward(&d, x.data(), x.data(), out.data(), nullptr, 0),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("desc->hadamard = 64"), std::string::npos)
      << tessera_last_error();
  for (float v : out) ASSERT_EQ(v, -7.0f);
  for (float v : kc) ASSERT_EQ(v, -7.0f);
  for (float v : vc) ASSERT_EQ(v, -7.0f);
  d.hadamard = 32, d.hadamard_v = 1;
  EXPECT_EQ(tessera_mha_forward(&d, x.data(), x.data(), out.data(), nullptr, 0), TESSERA_OK)
      << tessera_last_error();
}

// The kernels' own path: `hadamard` on decode (one and few rows, split-KV) and prefill, every
// K/V type, against the reference on the rotated (and for a block K, rounded) queries.
TEST_P(Hadamard, AttentionAgainstTheReferenceOnTheRotatedQueries) {
  constexpr tessera_dtype kTypes[] = {TESSERA_F32, TESSERA_F16, TESSERA_Q8_0, TESSERA_Q4_0};
  uint32_t seed = 1;
  for (tessera_dtype kt : kTypes) {
    if (AttentionProblem::block(kt) && !tt::block_types_built()) continue;
    // q_len, kv_len, q_heads, kv_heads, head_dim, value_dim, n
    for (const auto& s : {std::array<int64_t, 7>{1, 700, 8, 2, 64, 64, 64},
                          std::array<int64_t, 7>{1, 3000, 4, 1, 128, 96, 32},
                          std::array<int64_t, 7>{3, 300, 4, 1, 32, 32, 8},
                          std::array<int64_t, 7>{65, 301, 2, 2, 64, 32, 32}})
      for (bool values : {false, true}) {
        SCOPED_TRACE(testing::Message() << "k " << kt << " q_len " << s[0] << " kv_len " << s[1]
                                        << " n " << s[6] << " values " << values);
        AttentionTester t(2, s[2], s[3], s[0], s[1], s[4], s[5]);
        t.kv_types(kt, values ? kt : TESSERA_F32).hadamard(s[6], values);
        if (seed % 2) t.with_lse().causal(TESSERA_ALIGN_BOTTOM_RIGHT);
        if (seed % 3 == 0) t.bshd().with_kv_lens();
        t.test(1e-5, seed++);
        if (HasFatalFailure()) return;
      }
  }
}

// Rotation changes nothing but the rounding: K (and V) rotated by tessera_hadamard with the
// call's `hadamard` set gives the unrotated call's output, to the float32 rounding of the
// rotations (f32 K/V; prefill and decode).
TEST_P(Hadamard, RotatedKeysAndValuesGiveTheUnrotatedOutput) {
  for (const auto& s : {std::array<int64_t, 3>{1, 2048, 128}, std::array<int64_t, 3>{40, 200, 64}})
    for (int64_t n : {int64_t(8), s[2]}) {
      SCOPED_TRACE(testing::Message() << "q_len " << s[0] << " n " << n);
      const int64_t heads = 4, kv_heads = 2, L = s[0], S = s[1], D = s[2];
      tessera_attention_desc d;
      ASSERT_EQ(tessera_attention_desc_init(&d, 1, heads, kv_heads, L, S, D, D), TESSERA_OK);
      const auto q = tt::random_vec(size_t(heads * L * D), 5, -2, 2);
      const auto k = tt::random_vec(size_t(kv_heads * S * D), 6, -2, 2);
      const auto v = tt::random_vec(size_t(kv_heads * S * D), 7);
      std::vector<float> kr(k.size()), vr(v.size()), plain(q.size()), rotated(q.size());
      ASSERT_EQ(tessera_attention(&d, q.data(), k.data(), v.data(), plain.data()), TESSERA_OK);
      ASSERT_EQ(tessera_hadamard(kv_heads * S, D, n, k.data(), D, kr.data(), D), TESSERA_OK);
      ASSERT_EQ(tessera_hadamard(kv_heads * S, D, n, v.data(), D, vr.data(), D), TESSERA_OK);
      d.hadamard = n, d.hadamard_v = 1;
      ASSERT_EQ(tessera_attention(&d, q.data(), kr.data(), vr.data(), rotated.data()), TESSERA_OK);
      // Scores |q.k| <= 4 D move by (log2 n + 2) ulps of |q||k| at most; outputs by their
      // softmax's relative change plus the value rotations' rounding: 1e-5 relative holds both.
      EXPECT_LE(tt::rel_err(rotated, plain), 1e-5);
    }
}

// Keys with a few outlier channels (four of 128 channels 20 times the rest, as a language
// model's keys have): 4-bit keys lose a third or more of the output unrotated, most of it the
// small values of an outlier's block rounded to zero. Rotated, the outliers' energy is spread over
// the block and what is left is the 4-bit noise of the whole energy: the score error falls to
// 0.4-0.5 of the unrotated one, the output error (through the softmax's exp) to 0.45-0.6
// (docs/design.md §13 has the arithmetic). The errors are summed over three seeds: one head's
// peaky softmax moves a single draw by 20%.
TEST_P(Hadamard, RotationKeepsFourBitKeysAccurateOnOutlierChannels) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const int64_t heads = 8, kv_heads = 2, D = 128;
  for (const auto& qk : {std::array<int64_t, 2>{1, 2048}, std::array<int64_t, 2>{64, 256}}) {
    const int64_t L = qk[0], S = qk[1];
    std::array<double, 3> err{}, total{};  // unrotated, n = 32, n = 128
    for (uint32_t seed = 23; seed < 26; ++seed) {
      std::mt19937 gen(seed);
      std::normal_distribution<float> n01(0.0f, 1.0f);
      std::vector<float> q(size_t(heads * L * D)), k(size_t(kv_heads * S * D)), v(k.size());
      for (auto& x : q) x = n01(gen);
      for (auto& x : v) x = n01(gen);
      for (size_t i = 0; i < k.size(); ++i) {
        const int64_t c = int64_t(i) % D;
        k[i] = n01(gen) * (c == 3 || c == 17 || c == 40 || c == 77 ? 20.0f : 1.0f);
      }
      tessera_attention_desc d;
      ASSERT_EQ(tessera_attention_desc_init(&d, 1, heads, kv_heads, L, S, D, D), TESSERA_OK);
      std::vector<float> exact(q.size()), got(q.size()), kr(k.size());
      std::vector<uint8_t> kq(tessera_dtype_size(TESSERA_Q4_0, int64_t(k.size())));
      ref::attention(d, q.data(), k.data(), v.data(), exact.data());
      for (size_t r = 0; r < 3; ++r) {
        const int64_t n = r == 0 ? 0 : r == 1 ? 32 : 128;
        if (n) {
          ASSERT_EQ(tessera_hadamard(kv_heads * S, D, n, k.data(), D, kr.data(), D), TESSERA_OK);
        }
        ASSERT_EQ(tessera_convert(TESSERA_F32, TESSERA_Q4_0, int64_t(k.size()),
                                  n ? kr.data() : k.data(), kq.data()),
                  TESSERA_OK);
        tessera_attention_desc dq = d;
        dq.k_type = TESSERA_Q4_0, dq.hadamard = n;
        ASSERT_EQ(tessera_attention(&dq, q.data(), kq.data(), v.data(), got.data()), TESSERA_OK);
        for (size_t i = 0; i < got.size(); ++i) {
          const double e = double(got[i]) - exact[i];
          err[r] += e * e, total[r] += double(exact[i]) * exact[i];
        }
      }
    }
    const double plain = std::sqrt(err[0] / total[0]), by32 = std::sqrt(err[1] / total[1]),
                 by128 = std::sqrt(err[2] / total[2]);
    std::printf(
        "[ %s ] outlier K q4_0, q %lld kv %lld: relative RMS unrotated %.3f, "
        "rotated n=32 %.3f (%.2f), n=128 %.3f (%.2f)\n",
        GetParam().c_str(), (long long)L, (long long)S, plain, by32, by32 / plain, by128,
        by128 / plain);
    EXPECT_LE(by32, 0.65 * plain);
    EXPECT_LE(by128, 0.65 * plain);
  }
}

}  // namespace

}  // namespace hadamard_test
