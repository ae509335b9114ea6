// ULP tables for the vectorized exp and tanh of every kernel table this machine runs.
//
// The points are float bit patterns taken at a fixed stride through the whole range (so every
// binade is sampled in proportion to its size, as an exhaustive sweep would weigh it): 10^8
// natively, 2^21 under qemu, 2^22 in sanitizer builds (tests/CMakeLists.txt). Errors are measured
// against the correctly rounded result (double precision, then rounded), so a 1-ulp library exp
// would count as at most 1 ulp here too.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "arch/kernels.hpp"
#include "src/runtime/dispatch.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace {

constexpr int64_t kPoints = TESSERA_ULP_POINTS;  // set by tests/CMakeLists.txt

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Error of y in units in the last place of the correctly rounded reference.
double ulp_error(float y, double ref) {
  const float r = static_cast<float>(ref);
  if (y == r) return 0.0;
  if (!std::isfinite(r) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
  const double ulp =
      std::nextafter(std::fabs(r), std::numeric_limits<float>::infinity()) - std::fabs(r);
  return std::fabs(double(y) - ref) / ulp;
}

struct Worst {
  double ulp = 0.0;
  float x = 0.0f;
};

// Sweeps [lo, hi] (both signs handled by the caller's ranges) in blocks, every table at once.
using ArrayFn = void (*)(int64_t, const float*, float*);
std::vector<Worst> sweep(const std::vector<ArrayFn>& fns, float lo, float hi, int64_t points,
                         double (*ref)(double)) {
  // Enumerate the floats in [lo, hi] by an ordered integer key.
  auto key = [](float f) -> int64_t {
    const int32_t b = static_cast<int32_t>(to_bits(f));
    return b >= 0 ? int64_t(b) : -int64_t(b & 0x7fffffff);
  };
  auto unkey = [](int64_t k) {
    return k >= 0 ? from_bits(uint32_t(k)) : from_bits(uint32_t(-k) | 0x80000000u);
  };
  const int64_t k0 = key(lo), k1 = key(hi);
  const int64_t stride = std::max<int64_t>(1, (k1 - k0) / points);
  std::vector<Worst> worst(fns.size());
  constexpr int64_t kBlock = 1 << 16;
  std::vector<float> x(kBlock), y(kBlock);
  std::vector<double> r(kBlock);
  for (int64_t k = k0; k <= k1;) {
    int64_t n = 0;
    for (; n < kBlock && k <= k1; ++n, k += stride) x[size_t(n)] = unkey(k);
    for (int64_t i = 0; i < n; ++i) r[size_t(i)] = ref(x[size_t(i)]);
    for (size_t f = 0; f < fns.size(); ++f) {
      fns[f](n, x.data(), y.data());
      for (int64_t i = 0; i < n; ++i) {
        const double e = ulp_error(y[size_t(i)], r[size_t(i)]);
        if (e > worst[f].ulp) worst[f] = {e, x[size_t(i)]};
      }
    }
  }
  return worst;
}

std::vector<const tessera::arch::KernelTable*> tables() {
  std::vector<const tessera::arch::KernelTable*> out;
  for (const auto& name : tt::isas()) out.push_back(tessera::detail::find_table(name.c_str()));
  return out;
}

void print_table(const char* fn, const char* range, const std::vector<Worst>& w) {
  const auto t = tables();
  std::printf("ULP table: %s on %s (%" PRId64 " points)\n", fn, range, kPoints);
  for (size_t i = 0; i < t.size(); ++i)
    std::printf("  %-7s max %.3f ulp at x = %.9g\n", t[i]->name, w[i].ulp, double(w[i].x));
}

TEST(Transcendental, ExpWithinTwoUlpOnItsRange) {
  std::vector<ArrayFn> fns;
  for (auto* t : tables()) fns.push_back(t->softmax.exp);
  const auto w = sweep(fns, -87.3365f, 88.7228f, kPoints, [](double v) { return std::exp(v); });
  print_table("exp", "[-87.3365, 88.7228]", w);
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_LE(w[i].ulp, 2.0) << tables()[i]->name << " at " << w[i].x;
}

// The variant softmax and attention use (arguments x - max <= 0): its own table, since it
// builds 2^n differently; and bitwise equal to exp wherever both apply.
TEST(Transcendental, ExpNonpositiveWithinTwoUlpAndEqualToExp) {
  std::vector<ArrayFn> fns;
  for (auto* t : tables()) fns.push_back(t->softmax.exp_nonpositive);
  const auto w = sweep(fns, -87.3365f, -0.0f, kPoints / 2, [](double v) { return std::exp(v); });
  print_table("exp (x <= 0 variant)", "[-87.3365, 0]", w);
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_LE(w[i].ulp, 2.0) << tables()[i]->name << " at " << w[i].x;
  const float nan_payload = from_bits(0x7fc01234u);
  std::vector<float> x = {-tt::kInf, -1e30f, -87.5f, -87.3365479f, -87.336540f, -1.0f,
                          -1e-30f,   -0.0f,  0.0f,   tt::kNaN,     nan_payload};
  for (int i = 0; i < 4096; ++i) x.push_back(-87.3f * float(i) / 4096.0f);
  for (auto* t : tables()) {
    std::vector<float> y(x.size()), e(x.size());
    t->softmax.exp_nonpositive(int64_t(x.size()), x.data(), y.data());
    t->softmax.exp(int64_t(x.size()), x.data(), e.data());
    EXPECT_EQ(y[0], 0.0f) << t->name;
    EXPECT_EQ(y[3], 0.0f) << t->name << ": the float below log(FLT_MIN) flushes";
    EXPECT_GT(y[4], 0.0f) << t->name;
    EXPECT_EQ(y[7], 1.0f) << t->name;
    EXPECT_TRUE(std::isnan(y[9])) << t->name;
    EXPECT_TRUE(std::isnan(y[10])) << t->name << ": a NaN payload must not leak into the exponent";
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) continue;
      EXPECT_EQ(to_bits(y[i]), to_bits(e[i])) << t->name << " at " << x[i];
    }
  }
}

// exp(scale x - shift) as the softmax kernels and fused attention compute it: u = scale x - shift
// rounded, then exp (natural form) or 2^(u log2 e) (AVX-512, arch/common/exp.hpp ShiftedExp).
// Bound: 2 ulp plus what rounding the argument costs, 2^-24 relative per unit of |u| for u's
// own rounding and, in base 2, as much again for t = u log2 e and half that for log2 e (without
// FMA, |scale x| for the product's rounding): nothing that grows with the shift (exps against
// different shifts are combined across a long row's chunks and attention's tiles). Arguments up to
// 4 above 0 (attention's lazy rescale).
TEST(Transcendental, ExpShiftedWithinTwoUlpPlusArgumentRounding) {
  struct Case {
    float scale, shift, lo, hi;  // x in [lo, hi]: u in about [-87.3, 4]
  };
  const Case cases[] = {{1.0f, 0.0f, -87.3f, 4.0f},
                        {0.125f, 3.0f, -674.0f, 56.0f},
                        {1.7f, -20.0f, -63.1f, -9.4f},
                        {0.7f, 60.0f, -39.0f, 91.4f}};
  constexpr int64_t kN = 1 << 16;
  std::printf("exp(scale x - shift) against its bound (2 ulp + argument rounding):\n");
  for (auto* t : tables()) {
    // SSE2 has no FMA: scale x is rounded before the shift is subtracted (|scale x| 2^-24, a
    // function of x alone, the same against any shift).
    const bool has_fma = std::strcmp(t->name, "sse2") != 0;
    double worst = 0.0, worst_ulp = 0.0;
    for (const Case& c : cases) {
      std::vector<float> x(kN), y(kN);
      for (int64_t chunk = 0; chunk < std::max<int64_t>(1, kPoints / 8 / kN); ++chunk) {
        for (int64_t i = 0; i < kN; ++i)
          x[size_t(i)] = c.lo + (c.hi - c.lo) * float(double(chunk * kN + i) /
                                                      double(std::max<int64_t>(kN, kPoints / 8)));
        t->softmax.exp_shifted(kN, x.data(), c.scale, c.shift, y.data());
        for (int64_t i = 0; i < kN; ++i) {
          const double xs = double(x[size_t(i)]) * c.scale, u = xs - c.shift, ref = std::exp(u);
          if (ref < double(std::numeric_limits<float>::min())) continue;  // flushes: not measured
          const double ulp = ulp_error(y[size_t(i)], ref);
          const double rel = std::fabs(double(y[size_t(i)]) - ref) / ref;
          const double bound =
              2.0 * std::ldexp(1.0, -23) +
              std::ldexp(1.0, -24) * (2.5 * std::fabs(u) + (has_fma ? 0.0 : std::fabs(xs)));
          worst = std::max(worst, rel / bound);
          worst_ulp = std::max(worst_ulp, ulp);
          if (rel > bound) {
            ADD_FAILURE() << t->name << " x " << x[size_t(i)] << " scale " << c.scale << " shift "
                          << c.shift << ": " << y[size_t(i)] << " vs " << ref;
            break;
          }
        }
      }
    }
    std::printf("  %-7s max %.3f of the bound, %.1f ulp\n", t->name, worst, worst_ulp);
  }
  for (auto* t : tables()) {  // special arguments
    const float x[] = {-tt::kInf, tt::kNaN, -1e30f, 0.0f, 1.0f};
    float y[5];
    t->softmax.exp_shifted(5, x, 1.0f, 1.0f, y);
    EXPECT_EQ(y[0], 0.0f) << t->name;
    EXPECT_TRUE(std::isnan(y[1])) << t->name;
    EXPECT_EQ(y[2], 0.0f) << t->name;
    EXPECT_NEAR(y[3], std::exp(-1.0f), 1e-7f) << t->name;
    EXPECT_EQ(y[4], 1.0f) << t->name << ": at the max, exactly 1";
  }
}

TEST(Transcendental, ExpSpecialValues) {
  const float inf = tt::kInf;
  const std::vector<float> x = {-inf,  -1e30f, -104.0f, -87.5f, -87.34f, 0.0f,
                                -0.0f, 88.73f, 89.0f,   1e30f,  inf,     tt::kNaN};
  for (auto* t : tables()) {
    std::vector<float> y(x.size());
    t->softmax.exp(int64_t(x.size()), x.data(), y.data());
    EXPECT_EQ(y[0], 0.0f) << t->name;
    EXPECT_EQ(y[1], 0.0f) << t->name;
    EXPECT_EQ(y[2], 0.0f) << t->name;
    EXPECT_EQ(y[3], 0.0f) << t->name << ": below the range is exactly 0";
    EXPECT_EQ(y[4], 0.0f) << t->name;
    EXPECT_EQ(y[5], 1.0f) << t->name;
    EXPECT_EQ(y[6], 1.0f) << t->name;
    EXPECT_EQ(y[7], inf) << t->name;
    EXPECT_EQ(y[8], inf) << t->name;
    EXPECT_EQ(y[9], inf) << t->name;
    EXPECT_EQ(y[10], inf) << t->name;
    EXPECT_TRUE(std::isnan(y[11])) << t->name;
    for (size_t i = 0; i + 1 < x.size(); ++i)
      EXPECT_FALSE(std::isnan(y[i])) << t->name << " at " << x[i];
  }
}

TEST(Transcendental, TanhWithinTwoUlpEverywhere) {
  // ARMv7 Advanced SIMD flushes subnormal inputs and results to zero (architecturally, not a
  // mode), so on neon32 the sweep starts at FLT_MIN; everywhere else at the smallest subnormal.
  for (auto* t : tables()) {
    const bool ftz = std::strcmp(t->name, "neon32") == 0;
    const float tiny =
        ftz ? std::numeric_limits<float>::min() : std::numeric_limits<float>::denorm_min();
    const float big = std::numeric_limits<float>::max();
    auto ref = [](double v) { return std::tanh(v); };
    auto neg = sweep({t->softmax.tanh}, -big, -tiny, kPoints / 2, ref);
    auto pos = sweep({t->softmax.tanh}, tiny, big, kPoints / 2, ref);
    const Worst w = pos[0].ulp > neg[0].ulp ? pos[0] : neg[0];
    std::printf("ULP table: tanh on all finite floats from %g (%" PRId64
                " points)\n  %-7s max %.3f ulp at x = %.9g\n",
                double(tiny), kPoints, t->name, w.ulp, double(w.x));
    EXPECT_LE(w.ulp, 2.0) << t->name << " at " << w.x;
  }
  for (auto* t : tables()) {
    const float x[] = {0.0f, -0.0f, tt::kInf, -tt::kInf, tt::kNaN, 20.0f, -20.0f};
    float y[7];
    t->softmax.tanh(7, x, y);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_TRUE(std::signbit(y[1])) << t->name;
    EXPECT_EQ(y[2], 1.0f) << t->name;
    EXPECT_EQ(y[3], -1.0f) << t->name;
    EXPECT_TRUE(std::isnan(y[4])) << t->name;
    EXPECT_EQ(y[5], 1.0f) << t->name;
    EXPECT_EQ(y[6], -1.0f) << t->name;
  }
}

// Every length from 1 to past four vectors, at every offset of a vector: the vector bodies and
// the tails of exp, its x <= 0 and shifted forms, and tanh, each element within its bound (the
// sweeps above call whole blocks, so only this sees a tail lane).
TEST(Transcendental, EveryLengthAndOffset) {
  for (auto* t : tables()) {
    SCOPED_TRACE(t->name);
    testers::transcendental_kernels(*t);
  }
}

}  // namespace

void testers::transcendental_kernels(const tessera::arch::KernelTable& t) {
  const int64_t W = t.simd_floats, top = 4 * W + 3;
  const auto x = tt::random_vec(size_t(top + W), 77, -80.0f, 80.0f);
  std::vector<float> xn(x.size()), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) xn[i] = -std::fabs(x[i]);
  const bool has_fma = std::strcmp(t.name, "sse2") != 0;
  for (int64_t n = 1; n <= top; ++n)
    for (int64_t off = 0; off < W; ++off) {
      const float* in = x.data() + off;
      t.softmax.exp(n, in, y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(ulp_error(y[size_t(i)], std::exp(double(in[i]))), 2.0)
            << "exp, n " << n << " offset " << off << " element " << i;
      t.softmax.exp_nonpositive(n, xn.data() + off, y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(ulp_error(y[size_t(i)], std::exp(double(xn[size_t(off + i)]))), 2.0)
            << "exp_nonpositive, n " << n << " offset " << off << " element " << i;
      t.softmax.tanh(n, in, y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(ulp_error(y[size_t(i)], std::tanh(double(in[i]))), 2.0)
            << "tanh, n " << n << " offset " << off << " element " << i;
      const float scale = 0.5f, shift = 3.0f;  // u in [-43, 37]
      t.softmax.exp_shifted(n, in, scale, shift, y.data());
      for (int64_t i = 0; i < n; ++i) {
        const double xs = double(in[i]) * scale, u = xs - shift, ref = std::exp(u);
        const double bound =
            2.0 * std::ldexp(1.0, -23) +
            std::ldexp(1.0, -24) * (2.5 * std::fabs(u) + (has_fma ? 0.0 : std::fabs(xs)));
        ASSERT_LE(std::fabs(double(y[size_t(i)]) - ref) / ref, bound)
            << "exp_shifted, n " << n << " offset " << off << " element " << i;
      }
    }
}
