// Half-precision GEMM (tessera::hgemm) against reference::hgemm on every kernel table, each C
// element within the bound tessera.h states (fp16 sums where the table has fp16 arithmetic): the
// edge lattice, all four transposes, the task grid's edges, padded strides with a guard band,
// the BLAS scalar rules, the same C on any thread count, which arithmetic ran, and the checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "tessera/gemm.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

#include <gtest/gtest-spi.h>

namespace hgemm_test {

using tessera::Status;
using tessera::Transpose;
namespace ref = tessera::reference;

namespace {

constexpr uint16_t kGuard = 0x7bff;  // 65504, never a result here
constexpr Transpose kTrans[] = {Transpose::no_trans, Transpose::trans};

std::vector<uint16_t> halves(size_t n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  const auto f = tt::random_vec(n, seed);
  for (size_t i = 0; i < n; ++i) h[i] = ref::f32_to_f16(f[i]);
  return h;
}

struct Shape {
  int64_t m, n, k;
  Transpose ta, tb;
  float alpha, beta;
};

bool fp16_table() { return tessera::detail::active_table().hgemm.packed[1] != nullptr; }

// One product's operands: A, B, C's input (beta != 0) and the shapes of their storage.
struct Operands {
  Shape s;
  int64_t lda, ldb, ldc;
  std::vector<uint16_t> a, b, c_in;
  Operands(const Shape& shape, uint32_t seed)
      : s(shape),
        lda((s.ta == Transpose::trans ? s.m : s.k) + 2),
        ldb((s.tb == Transpose::trans ? s.k : s.n) + 1),
        ldc(s.n + 3),
        a(halves(size_t((s.ta == Transpose::trans ? s.k : s.m) * lda + 1), seed)),
        b(halves(size_t((s.tb == Transpose::trans ? s.n : s.k) * ldb + 1), seed + 7)),
        c_in(halves(size_t(s.m * s.n), seed + 11)) {}
  uint16_t& a_at(int64_t i, int64_t p) {
    return s.ta == Transpose::trans ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)];
  }
  uint16_t a_at(int64_t i, int64_t p) const { return const_cast<Operands*>(this)->a_at(i, p); }
  uint16_t& b_at(int64_t p, int64_t j) {
    return s.tb == Transpose::trans ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)];
  }
  uint16_t b_at(int64_t p, int64_t j) const { return const_cast<Operands*>(this)->b_at(p, j); }
  // C with a guard row above and below and 3 guard columns; NaN where beta = 0 must not read.
  std::vector<uint16_t> c_with_guard() const {
    std::vector<uint16_t> c(size_t((s.m + 2) * ldc), kGuard);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        c[size_t((i + 1) * ldc + j)] =
            s.beta == 0.0f ? uint16_t(0x7e00) : c_in[size_t(i * s.n + j)];
    return c;
  }
  // The reference (the exact result rounded once to f16), in the same storage.
  std::vector<uint16_t> reference() const {
    std::vector<uint16_t> c = c_with_guard();
    ref::hgemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, a.data(), lda, b.data(), ldb, s.beta,
               c.data() + ldc, ldc);
    return c;
  }
};

// The spacing of f16 values at |x| (2^-24 below the normal range).
double f16_ulp(double x) {
  const int e = std::max(std::ilogb(std::max(std::fabs(x), 0x1p-14)), -14);
  return std::ldexp(1.0, e - 10);
}

// Checks got (C with its guard, as Operands lays it out) against the bound of the arithmetic the
// active table does: fp16 chunks where it has fp16 arithmetic (tessera.h's bound); elsewhere a
// float32 sum rounded once to f16, within one f16 ulp of the reference (whose own rounding is
// half of one, the float32 result's the other half) plus SGEMM's float32 bound. Returns the
// largest |error| / (|alpha| sum |A B|) seen.
double check(const Operands& x, const std::vector<uint16_t>& got_c) {
  const Shape& s = x.s;
  const int64_t ldc = x.ldc;
  const std::vector<uint16_t> want = x.reference();
  const bool fp16 = fp16_table();
  const double u = std::ldexp(1.0, -11), ch = double(std::min<int64_t>(s.k, 64));
  const double g = ch * u / (1.0 - ch * u),
               e = std::ldexp(std::ceil(double(s.k) / std::max(ch, 1.0)), -22);
  double worst = 0.0;
  int bad = 0;
  for (int64_t i = -1; i <= s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const uint16_t got = got_c[size_t((i + 1) * ldc + j)];
      if (i < 0 || i == s.m || j >= s.n) {
        if (got != kGuard && ++bad <= 3) ADD_FAILURE() << "wrote outside C at " << i << "," << j;
        continue;
      }
      double mag = 0.0;
      for (int64_t p = 0; p < s.k; ++p)
        mag += std::fabs(double(ref::f16_to_f32(x.a_at(i, p))) *
                         double(ref::f16_to_f32(x.b_at(p, j))));
      const double w = ref::f16_to_f32(want[size_t((i + 1) * ldc + j)]);
      const double gv = ref::f16_to_f32(got);
      const double err = std::fabs(gv - w);
      const double am = std::fabs(double(s.alpha)) * mag;
      const double cin =
          s.beta == 0.0f ? 0.0 : double(ref::f16_to_f32(x.c_in[size_t(i * s.n + j)]));
      double bound;
      if (fp16) {
        // The reference itself rounded once: its own half ulp is inside u |C exact|, so the
        // bound is against the rounded value plus one more u |w|.
        bound =
            1.01 * (am * (g + e) + std::fabs(s.beta * cin) * e + 2.0 * u * std::fabs(w) +
                    double(s.k + 1) * std::ldexp(1.0, -25) * (std::fabs(double(s.alpha)) + 1.0));
      } else {
        const double sgemm = 2.0 * std::sqrt(double(std::max<int64_t>(s.k, 1))) *
                             std::ldexp(1.0, -24) * (am + std::fabs(s.beta * cin));
        bound = f16_ulp(std::max(std::fabs(w), std::fabs(gv))) + 1.01 * sgemm;
      }
      if (!(err <= bound) && ++bad <= 3)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << gv << ", want " << w << " within "
                      << bound << " (m " << s.m << " n " << s.n << " k " << s.k
                      << (fp16 ? ", fp16 sums)" : ", float32 sums)");
      if (am > 0) worst = std::max(worst, err / am);
    }
  return worst;
}

class Hgemm : public tt::IsaTest {
 protected:
  // Runs one product (C with 3 padding columns and a guard row above and below) and checks every
  // element. Returns the largest |error| / (|alpha| sum |A B|) seen.
  double run(const Shape& s, uint32_t seed) {
    const Operands x(s, seed);
    std::vector<uint16_t> c = x.c_with_guard();
    EXPECT_EQ(tessera::hgemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, x.a.data(), x.lda, x.b.data(),
                             x.ldb, s.beta, c.data() + x.ldc, x.ldc),
              Status::ok);
    return check(x, c);
  }
};
TESSERA_INSTANTIATE_PER_ISA(Hgemm);

TEST_P(Hgemm, EdgeLatticeAndTransposes) {
  const int64_t sizes[] = {1, 3, 17, 63, 65};
  const float scalars[][2] = {{1.0f, 0.0f}, {-0.5f, 1.0f}, {2.0f, 0.25f}};
  int combo = 0;
  for (Transpose ta : kTrans)
    for (Transpose tb : kTrans)
      for (int64_t m : sizes)
        for (int64_t n : sizes) {
          const auto* sc = scalars[combo % 3];
          run({m, n, sizes[(m + 2 * n + combo) % 5], ta, tb, sc[0], sc[1]}, uint32_t(combo));
          ++combo;
          if (HasFailure()) return;
        }
}

// Across the task grid (64 rows, 8 column panels) and a deep k; prints the error measured.
TEST_P(Hgemm, AcrossTheTaskGridAndDeepK) {
  const Shape shapes[] = {{129, 200, 300, Transpose::no_trans, Transpose::no_trans, 1.0f, 0.0f},
                          {65, 203, 520, Transpose::trans, Transpose::trans, 1.0f, 1.0f},
                          {1, 4096, 128, Transpose::no_trans, Transpose::trans, 1.0f, 0.0f},
                          {8, 24, 4096, Transpose::no_trans, Transpose::no_trans, 0.5f, 0.0f}};
  for (const Shape& s : shapes) {
    const double worst = run(s, 3);
    const double u = std::ldexp(1.0, -11), c = double(std::min<int64_t>(s.k, 64));
    std::printf(
        "[ %s ] hgemm %lldx%lldx%lld: max |error| / sum|A B| = %.2e (u = %.2e, bound g_c %.2e)\n",
        GetParam().c_str(), (long long)s.m, (long long)s.n, (long long)s.k, worst, u,
        c * u / (1 - c * u));
  }
}

// The probe that found the fp16 bound applied to float32 sums: the reference computed with one
// row of B zeroed (k term p dropped) is handed to the check as the result, and the check must
// reject it. Float32 tables: on every shape of AcrossTheTaskGridAndDeepK (at 8 x 24 x 4096 the
// fp16 bound was ~16.7 against a real error ~0.004). The fp16 table: on a shape whose dropped
// term is beyond its bound (k column p of A and row p of B 64 times the rest, so the term is
// most of sum |A B| and g_64 = 3.2% of it cannot hide it).
TEST_P(Hgemm, CheckRejectsADroppedTerm) {
  std::vector<Shape> shapes = {
      {129, 200, 300, Transpose::no_trans, Transpose::no_trans, 1.0f, 0.0f},
      {65, 203, 520, Transpose::trans, Transpose::trans, 1.0f, 1.0f},
      {1, 4096, 128, Transpose::no_trans, Transpose::trans, 1.0f, 0.0f},
      {8, 24, 4096, Transpose::no_trans, Transpose::no_trans, 0.5f, 0.0f}};
  const bool fp16 = fp16_table();
  if (fp16) shapes = {{16, 24, 256, Transpose::no_trans, Transpose::trans, 1.0f, 0.0f}};
  for (const Shape& s : shapes) {
    Operands x(s, 3);
    const int64_t dropped = s.k / 2;
    if (fp16)
      for (int64_t p = 0; p < s.k; ++p) {
        if (p == dropped) continue;
        for (int64_t i = 0; i < s.m; ++i)
          x.a_at(i, p) = ref::f32_to_f16(ref::f16_to_f32(x.a_at(i, p)) / 64.0f);
        for (int64_t j = 0; j < s.n; ++j)
          x.b_at(p, j) = ref::f32_to_f16(ref::f16_to_f32(x.b_at(p, j)) / 64.0f);
      }
    Operands probe = x;
    for (int64_t j = 0; j < s.n; ++j) probe.b_at(dropped, j) = 0;
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      check(x, probe.reference());
    }
    EXPECT_GT(failures.size(), 0) << s.m << "x" << s.n << "x" << s.k
                                  << ": the check passed a product with a k term dropped";
    if (fp16) {  // the product itself passes on this shape (the others: AcrossTheTaskGrid...)
      std::vector<uint16_t> c = x.c_with_guard();
      ASSERT_EQ(tessera::hgemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, x.a.data(), x.lda, x.b.data(),
                               x.ldb, s.beta, c.data() + x.ldc, x.ldc),
                Status::ok);
      check(x, c);
    }
  }
}

// NaN and inf in A or B reach exactly the elements of C whose sums they enter, on every table:
// a NaN in A(i, p) makes row i NaN; inf in B(p, j) makes column j infinite where the A(i, p) it
// meets is nonzero (and NaN where it is 0); the rest stays finite and checked.
TEST_P(Hgemm, NanAndInfReachTheirRowsAndColumns) {
  const Shape s{9, 21, 70, Transpose::no_trans, Transpose::no_trans, 1.0f, 0.0f};
  Operands x(s, 5);
  const uint16_t nan = 0x7e00, inf = 0x7c00;
  x.a_at(2, 10) = nan;
  x.b_at(33, 5) = inf;
  x.a_at(4, 33) = 0;  // inf x 0: NaN at (4, 5)
  std::vector<uint16_t> c = x.c_with_guard();
  ASSERT_EQ(tessera::hgemm(s.ta, s.tb, s.m, s.n, s.k, s.alpha, x.a.data(), x.lda, x.b.data(), x.ldb,
                           s.beta, c.data() + x.ldc, x.ldc),
            Status::ok);
  const std::vector<uint16_t> want = x.reference();
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      const float got = ref::f16_to_f32(c[size_t((i + 1) * x.ldc + j)]);
      const float w = ref::f16_to_f32(want[size_t((i + 1) * x.ldc + j)]);
      if (i == 2 || (i == 4 && j == 5)) {
        EXPECT_TRUE(std::isnan(got)) << i << "," << j;
      } else if (j == 5) {
        EXPECT_EQ(got, w) << i << "," << j << ": an infinite column";
        EXPECT_TRUE(std::isinf(got)) << i << "," << j;
      } else {
        EXPECT_TRUE(std::isfinite(got)) << i << "," << j;
      }
    }
}

// The sums are fp16 exactly where the table says so: 2048 + 1 + 1 is 2048 in fp16 (2049 is
// halfway between 2048 and 2050 and rounds to even), 2050 in float32.
TEST_P(Hgemm, SumsInTheTablesArithmetic) {
  const uint16_t a[3] = {ref::f32_to_f16(2048.0f), ref::f32_to_f16(1.0f), ref::f32_to_f16(1.0f)};
  const uint16_t b[3] = {ref::f32_to_f16(1.0f), ref::f32_to_f16(1.0f), ref::f32_to_f16(1.0f)};
  uint16_t c = 0;
  ASSERT_EQ(tessera::hgemm(Transpose::no_trans, Transpose::no_trans, 1, 1, 3, 1.0f, a, 3, b, 1,
                           0.0f, &c, 1),
            Status::ok);
  const bool fp16 = fp16_table();
  EXPECT_EQ(ref::f16_to_f32(c), fp16 ? 2048.0f : 2050.0f) << (fp16 ? "fp16" : "float32");
  if (GetParam() == "neon64_v82") {
    EXPECT_TRUE(fp16) << "neon64_v82 has FEAT_FP16 arithmetic";
  }
}

TEST_P(Hgemm, ScalarRules) {
  const uint16_t nan = 0x7e00, one = ref::f32_to_f16(1.0f), three = ref::f32_to_f16(3.0f);
  std::vector<uint16_t> a(4 * 5, nan), b(5 * 2, nan), c(4 * 2, three);
  // alpha = 0 reads neither A nor B: C = beta C.
  ASSERT_EQ(tessera::hgemm(Transpose::no_trans, Transpose::no_trans, 4, 2, 5, 0.0f, a.data(), 5,
                           b.data(), 2, 0.5f, c.data(), 2),
            Status::ok);
  for (uint16_t x : c) EXPECT_EQ(ref::f16_to_f32(x), 1.5f);
  // beta = 0 never reads C.
  std::fill(a.begin(), a.end(), one), std::fill(b.begin(), b.end(), one);
  std::fill(c.begin(), c.end(), nan);
  ASSERT_EQ(tessera::hgemm(Transpose::no_trans, Transpose::no_trans, 4, 2, 5, 1.0f, a.data(), 5,
                           b.data(), 2, 0.0f, c.data(), 2),
            Status::ok);
  for (uint16_t x : c) EXPECT_EQ(ref::f16_to_f32(x), 5.0f);
}

TEST_P(Hgemm, SameOnAnyThreadCount) {
  const int64_t m = 200, n = 300, k = 257;
  const auto a = halves(size_t(m * k), 5), b = halves(size_t(k * n), 6);
  std::vector<uint16_t> c1(size_t(m * n)), c2(size_t(m * n));
  for (auto* c : {&c1, &c2}) {
    ASSERT_EQ(tessera::set_num_threads(c == &c1 ? 1 : 2), Status::ok);
    ASSERT_EQ(tessera::hgemm(Transpose::no_trans, Transpose::trans, m, n, k, 1.0f, a.data(), k,
                             b.data(), k, 0.0f, c->data(), n),
              Status::ok);
  }
  tessera::set_num_threads(0);
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 2), 0);
}

TEST(HgemmApi, BadArgumentsNameTheArgumentAndWriteNothing) {
  std::vector<uint16_t> a(64, 0x3c00), b(64, 0x3c00), c(64, kGuard);
  const auto call = [&](int ta, int64_t m, int64_t lda, const void* ap, void* cp) {
    return tessera_hgemm(tessera_transpose(ta), TESSERA_NO_TRANS, m, 4, 4, 1.0f, ap, lda, b.data(),
                         4, 0.0f, cp, 4);
  };
  EXPECT_EQ(call(7, 4, 4, a.data(), c.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "ta"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(0, -1, 4, a.data(), c.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "m"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(0, 4, 3, a.data(), c.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "lda"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(0, 4, 4, nullptr, c.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tessera_last_error(), "a"), nullptr) << tessera_last_error();
  EXPECT_EQ(call(0, 4, 4, a.data(), a.data() + 2), TESSERA_INVALID_ARGUMENT);  // C overlaps A
  EXPECT_NE(std::strstr(tessera_last_error(), "overlap"), nullptr) << tessera_last_error();
  for (uint16_t x : c) EXPECT_EQ(x, kGuard);
  for (uint16_t x : a) EXPECT_EQ(x, 0x3c00);
}

}  // namespace

}  // namespace hgemm_test
