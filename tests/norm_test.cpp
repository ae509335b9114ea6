// A decoder block's row kernels (arch/common/norm.hpp) on their edge lattice, and tessera_norm /
// tessera_glu on every table against the reference, each value within the bound the header
// states for the arithmetic the kernel does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace norm_test {

namespace {

using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;
namespace ref = tessera::reference;

constexpr double kU = 0x1p-24;
constexpr float kGuard = -12345.0f;

// The norm contract's bound on the values of a row of n (after the residual add), W lanes.
std::vector<double> norm_bounds(bool layer, int64_t n, int W, const float* x, const float* gain,
                                const float* bias, float eps) {
  double m = 0, var = 0;
  if (layer) {
    for (int64_t j = 0; j < n; ++j) m += x[j];
    m /= double(n);
  }
  for (int64_t j = 0; j < n; ++j) var += (x[j] - m) * (x[j] - m);
  const double s = 1.0 / std::sqrt(var / double(n) + eps);
  const double K = double((n + W - 1) / W + W + 8);
  std::vector<double> b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    b[size_t(i)] =
        K * kU * (std::fabs(x[i] - m) + std::fabs(m)) * s * (gain ? std::fabs(gain[i]) : 1.0) +
        2 * kU * (bias ? std::fabs(bias[i]) : 0.0) + 1e-37;
  return b;
}

// The activation contract's bound on y[i].
double act_bound(bool gelu, float g, float u, double want) {
  double b = 8 * kU * std::fabs(want) + 1e-37;
  if (gelu) {
    const double z = std::sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g);
    const double t = std::tanh(z);
    b += std::fabs(0.5 * g * u) * kU * (6 * (1 - t * t) * std::fabs(z) + 4);
  }
  return b;
}

void test_norm(const KernelRow& row, bool layer) {
  const auto fn = reinterpret_cast<tessera::arch::NormRowFn>(row.fn);
  const int W = tessera::detail::find_table(row.table)->simd_floats;
  int bad = 0;
  for (const int64_t n : {1, 2, 3, 5, W - 1, W, W + 1, 2 * W + 3, 4 * W + 5, 100, 1000, 4096}) {
    if (n < 1) continue;
    for (int variant = 0; variant < 8 && bad < 3; ++variant) {
      const bool with_r = variant & 1, with_gb = variant & 2, in_place = variant & 4;
      // LayerNorm's data off centre (its mean's error is the bound's |m| term).
      auto x = tt::random_vec(size_t(n) + 2, uint32_t(n * 8 + variant), layer ? 1.0f : -2.0f, 3.0f);
      const auto r = tt::random_vec(size_t(n), uint32_t(n + 77));
      const auto gain = tt::random_vec(size_t(n), uint32_t(n + 78), 0.5f, 1.5f);
      const auto bias = tt::random_vec(size_t(n), uint32_t(n + 79));
      x[size_t(n)] = x[size_t(n) + 1] = kGuard;
      std::vector<float> want_x = x, want(static_cast<size_t>(n)),
                         y(static_cast<size_t>(n) + 2, kGuard);
      const float eps = layer || (variant & 1) ? 1e-5f : 0.0f;
      const float* g = with_gb ? gain.data() : nullptr;
      const float* b = with_gb ? bias.data() : nullptr;
      ref::norm(layer ? TESSERA_NORM_LAYER : TESSERA_NORM_RMS, 1, n, want_x.data(), n,
                with_r ? r.data() : nullptr, n, g, b, eps, want.data(), n);
      float* out = in_place ? x.data() : y.data();
      fn(n, x.data(), with_r ? r.data() : nullptr, g, b, eps, out);
      const float* stored = in_place ? want_x.data() : x.data();
      for (int64_t i = 0; i < n && !in_place; ++i)
        if (x[size_t(i)] != want_x[size_t(i)] && ++bad <= 3)
          ADD_FAILURE() << row.name << " n " << n << ": x + r at " << i << " is " << x[size_t(i)]
                        << ", not " << want_x[size_t(i)];
      const auto bounds = norm_bounds(layer, n, W, stored, g, b, eps);
      for (int64_t i = 0; i < n; ++i) {
        const double bound = bounds[size_t(i)];
        if (!(std::fabs(double(out[i]) - want[size_t(i)]) <= bound) && ++bad <= 3)
          ADD_FAILURE() << row.name << " n " << n << " variant " << variant << " y[" << i
                        << "] = " << out[i] << ", want " << want[size_t(i)] << " within " << bound;
      }
      if ((x[size_t(n)] != kGuard || (!in_place && y[size_t(n)] != kGuard)) && ++bad <= 3)
        ADD_FAILURE() << row.name << " n " << n << " wrote past the row";
    }
  }
}

void test_act(const KernelRow& row, bool gelu) {
  const auto fn = reinterpret_cast<tessera::arch::ActivationRowFn>(row.fn);
  const int W = tessera::detail::find_table(row.table)->simd_floats;
  int bad = 0;
  for (const int64_t n : {1, 2, 3, W - 1, W, W + 1, 3 * W + 2, 1000, 4099}) {
    if (n < 1) continue;
    for (int variant = 0; variant < 4 && bad < 3; ++variant) {
      const bool with_u = variant & 1, in_place = variant & 2;
      auto g = tt::random_vec(size_t(n) + 1, uint32_t(n * 4 + variant), -12.0f, 12.0f);
      const auto u = tt::random_vec(size_t(n), uint32_t(n + 5), -2.0f, 2.0f);
      g[size_t(n)] = kGuard;
      std::vector<float> want(static_cast<size_t>(n)), y(static_cast<size_t>(n) + 1, kGuard);
      const float* up = with_u ? u.data() : nullptr;
      ref::glu(gelu ? TESSERA_ACT_GELU_TANH : TESSERA_ACT_SILU, 1, n, g.data(), n, up, n,
               want.data(), n);
      const auto g_in = g;
      float* out = in_place ? g.data() : y.data();
      fn(n, g.data(), up, out);
      for (int64_t i = 0; i < n; ++i) {
        const double bound =
            act_bound(gelu, g_in[size_t(i)], with_u ? u[size_t(i)] : 1.0f, want[size_t(i)]);
        if (!(std::fabs(double(out[i]) - want[size_t(i)]) <= bound) && ++bad <= 3)
          ADD_FAILURE() << row.name << " n " << n << " g " << g_in[size_t(i)] << ": " << out[i]
                        << ", want " << want[size_t(i)] << " within " << bound;
      }
      if ((g[size_t(n)] != kGuard || y[size_t(n)] != kGuard) && ++bad <= 3)
        ADD_FAILURE() << row.name << " n " << n << " wrote past the row";
    }
  }
}

bool is_norm_act(KernelFamily f) {
  return f == KernelFamily::norm_rms || f == KernelFamily::norm_layer ||
         f == KernelFamily::act_silu || f == KernelFamily::act_gelu_tanh;
}

TEST(NormActKernels, EveryRegisteredKernelOnItsEdgeLattice) {
  int seen = 0;
  for (const KernelRow& row : tessera::detail::kernel_registry()) {
    if (!is_norm_act(row.family)) continue;
    SCOPED_TRACE(row.name);
    testers::norm_act_kernel(row);
    ++seen;
  }
  EXPECT_GE(seen, 4);
}

// ---- tessera_norm and tessera_glu ---------------------------------------------------------

class Norm : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Norm);

// Many rows (split across threads) with strides, both kinds, against the reference row by row.
TEST_P(Norm, BothKindsOnStridedRowsAgainstTheReference) {
  const int W = tessera::detail::active_table().simd_floats;
  const int64_t rows = 67, dim = 1000, ld = 1003;
  for (const auto kind : {TESSERA_NORM_RMS, TESSERA_NORM_LAYER}) {
    auto x = tt::random_vec(size_t(rows * ld), 5, 0.5f, 2.0f);
    const auto r = tt::random_vec(size_t(rows * ld), 6);
    const auto gain = tt::random_vec(size_t(dim), 7, 0.5f, 1.5f);
    const auto bias = tt::random_vec(size_t(dim), 8);
    auto want_x = x;
    std::vector<float> y(size_t(rows * ld), kGuard), want(y.size(), kGuard);
    ASSERT_EQ(tessera_norm(kind, rows, dim, x.data(), ld, r.data(), ld, gain.data(), bias.data(),
                           1e-6f, y.data(), ld),
              TESSERA_OK)
        << tessera_last_error();
    ref::norm(kind, rows, dim, want_x.data(), ld, r.data(), ld, gain.data(), bias.data(), 1e-6f,
              want.data(), ld);
    ASSERT_EQ(x, want_x) << "the residual sums";
    int bad = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const auto bounds = norm_bounds(kind == TESSERA_NORM_LAYER, dim, W, x.data() + i * ld,
                                      gain.data(), bias.data(), 1e-6f);
      for (int64_t j = 0; j < ld; ++j) {
        const size_t at = size_t(i * ld + j);
        if (j >= dim) {
          if (y[at] != kGuard && ++bad <= 3) ADD_FAILURE() << "wrote between rows";
          continue;
        }
        const double bound = bounds[size_t(j)];
        if (!(std::fabs(double(y[at]) - want[at]) <= bound) && ++bad <= 3)
          ADD_FAILURE() << "row " << i << " value " << j << ": " << y[at] << " for " << want[at];
      }
    }
  }
}

TEST_P(Norm, GluBothActivationsInPlaceAgainstTheReference) {
  const int64_t rows = 40, dim = 1100;
  for (const auto act : {TESSERA_ACT_SILU, TESSERA_ACT_GELU_TANH})
    for (const bool gated : {true, false}) {
      const auto g = tt::random_vec(size_t(rows * dim), 9, -6.0f, 6.0f);
      const auto u = tt::random_vec(size_t(rows * dim), 10);
      auto y = g;
      std::vector<float> want(g.size());
      ASSERT_EQ(tessera_glu(act, rows, dim, y.data(), dim, gated ? u.data() : nullptr, dim,
                            y.data(), dim),
                TESSERA_OK)
          << tessera_last_error();
      ref::glu(act, rows, dim, g.data(), dim, gated ? u.data() : nullptr, dim, want.data(), dim);
      int bad = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        const double bound =
            act_bound(act == TESSERA_ACT_GELU_TANH, g[i], gated ? u[i] : 1.0f, want[i]);
        if (!(std::fabs(double(y[i]) - want[i]) <= bound) && ++bad <= 3)
          ADD_FAILURE() << i << ": " << y[i] << " for " << want[i];
      }
    }
}

TEST_P(Norm, BadArgumentsNamedAndNothingWritten) {
  std::vector<float> x(64, 1.0f), y(64, 7.0f);
  const auto x0 = x;
  float* X = x.data();
  float* Y = y.data();
  const auto rms = TESSERA_NORM_RMS;
  const std::vector<std::pair<const char*, std::function<tessera_status()>>> cases = {
      {"kind",
       [&] {
         return tessera_norm(tessera_norm_kind(5), 2, 32, X, 32, nullptr, 0, nullptr, nullptr, 0, Y,
                             32);
       }},
      {"dim",
       [&] { return tessera_norm(rms, 2, 0, X, 32, nullptr, 0, nullptr, nullptr, 0, Y, 32); }},
      {"ldx",
       [&] { return tessera_norm(rms, 2, 32, X, 31, nullptr, 0, nullptr, nullptr, 0, Y, 32); }},
      {"eps",
       [&] { return tessera_norm(rms, 2, 32, X, 32, nullptr, 0, nullptr, nullptr, -1, Y, 32); }},
      {"y",
       [&] { return tessera_norm(rms, 2, 32, X, 32, nullptr, 0, nullptr, nullptr, 0, X + 1, 32); }},
      {"residual",
       [&] { return tessera_norm(rms, 2, 32, X, 32, X + 8, 32, nullptr, nullptr, 0, Y, 32); }},
      {"act", [&] { return tessera_glu(tessera_activation(3), 2, 32, X, 32, nullptr, 0, Y, 32); }},
      {"ldu", [&] { return tessera_glu(TESSERA_ACT_SILU, 2, 32, X, 32, X, 8, Y, 32); }},
      {"gate",
       [&] { return tessera_glu(TESSERA_ACT_SILU, 2, 32, nullptr, 32, nullptr, 0, Y, 32); }},
  };
  for (const auto& [field, call] : cases) {
    EXPECT_EQ(call(), TESSERA_INVALID_ARGUMENT) << field;
    EXPECT_NE(std::string(tessera_last_error()).find(field), std::string::npos)
        << field << ": " << tessera_last_error();
  }
  EXPECT_EQ(x, x0);
  for (const float v : y) ASSERT_EQ(v, 7.0f);
}

}  // namespace

}  // namespace norm_test

void testers::norm_act_kernel(const tessera::detail::KernelRow& row) {
  using namespace norm_test;
  switch (row.family) {
    case KernelFamily::norm_rms:
      return test_norm(row, false);
    case KernelFamily::norm_layer:
      return test_norm(row, true);
    case KernelFamily::act_silu:
      return test_act(row, false);
    case KernelFamily::act_gelu_tanh:
      return test_act(row, true);
    default:
      FAIL() << row.name << " is not a norm or activation kernel";
  }
}
