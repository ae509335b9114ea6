// Helpers shared by the test files: seeded random data, error norms, and the per-ISA fixture
// that runs each test once for every kernel table this machine supports (the Highway habit).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "tessera/tessera.h"
#include "tessera/threading.hpp"

namespace tt {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// ||out - ref||_inf / ||ref||_inf, the acceptance norm of docs/design.md: relative to the
// output's own largest value, whatever its size (an output near 0.15 is held to 1e-5 of 0.15,
// not of 1). A reference of zeros leaves it absolute. A NaN where the reference has a number
// (or the reverse) counts as infinite error.
inline double rel_err(const float* out, const float* ref, size_t n) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(out[i]) != std::isnan(ref[i])) return std::numeric_limits<double>::infinity();
    if (std::isnan(ref[i])) continue;
    if (std::isinf(ref[i]) || std::isinf(out[i])) {
      if (out[i] != ref[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    err = std::max(err, std::fabs(double(out[i]) - double(ref[i])));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0.0 ? err / scale : err;
}
inline double rel_err(const std::vector<float>& out, const std::vector<float>& ref) {
  EXPECT_EQ(out.size(), ref.size());
  return rel_err(out.data(), ref.data(), std::min(out.size(), ref.size()));
}

// TESSERA_TEST_TABLES=best: the per-table fixtures run the best table only. The ThreadSanitizer
// stage: its races live in the scheduling every table shares. The -fno-exceptions shared build:
// what it changes is the API's error paths and linkage, which every table shares; its kernels
// compile as the release stage's do. Every other stage runs them all.
inline bool best_table_only() {
  const char* e = std::getenv("TESSERA_TEST_TABLES");
  return e && std::string(e) == "best";
}
// Every kernel table the machine runs, best first as the dispatcher ranks them
// (Contract.EveryTableThisCpuRunsIsTested checks the list against the CPU's features read apart).
inline std::vector<std::string> all_isas() {
  const char* names[8];
  const int n = tessera::detail::tables_for(tessera::detail::hardware(), names, 8);
  return {names, names + n};
}
// The tables the per-table fixtures sweep: all of them (a table added to the dispatcher is tested
// by every fixture), or the best under TESSERA_TEST_TABLES=best.
inline std::vector<std::string> isas() {
  std::vector<std::string> all = all_isas();
  if (best_table_only() && all.size() > 1) all.resize(1);
  return all;
}

// Fixture base: selects the table named by the test parameter for the test's duration.
class IsaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    previous_ = tessera::isa_name();
    ASSERT_EQ(tessera::set_isa(GetParam().c_str()), tessera::Status::ok) << GetParam();
  }
  void TearDown() override { tessera::set_isa(previous_.c_str()); }

 private:
  std::string previous_;
};

// False in a build with TESSERA_QUANTIZED=OFF: the block types' calls are then TESSERA_UNSUPPORTED
// (tested by QuantFormat.UnsupportedInABuildWithoutThem) and their tests skip.
inline bool block_types_built() {
  const float x[32] = {};
  uint8_t y[34];
  return tessera_convert(TESSERA_F32, TESSERA_Q8_0, 32, x, y) == TESSERA_OK;
}

// q4_0 blocks whose values sit a few ulps from the truncation points: x id + 8.5 lands on an
// integer when x id is rounded first (the format) and below it when fused into one FMA, so a
// quantizer compiled with contraction differs from the reference here (fuzz_convert found one).
inline std::vector<float> q4_0_contraction_blocks() {
  std::vector<float> x;
  for (const float m : {1.28559e-09f, 0.7f, 3.3f, 1234.5f}) {
    std::vector<float> blk{-m};  // the max: d = m / 8
    const float d = -m / -8.0f, id = 1.0f / d;
    for (int k = 1; k < 16 && blk.size() < 32; ++k) {
      float v = (float(k) - 8.5f) * d;  // 32 ulps either side
      for (int i = 0; i < 32; ++i) v = std::nextafter(v, -kInf);
      for (int i = 0; i < 64 && blk.size() < 32; ++i, v = std::nextafter(v, kInf)) {
        volatile float p = v * id;
        if (std::trunc(p + 8.5f) != std::trunc(std::fma(v, id, 8.5f))) blk.push_back(v);
      }
    }
    blk.resize(32, 0.0f);
    x.insert(x.end(), blk.begin(), blk.end());
  }
  return x;
}

inline std::string isa_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace tt

#define TESSERA_SKIP_WITHOUT_BLOCK_TYPES() \
  if (!tt::block_types_built()) GTEST_SKIP() << "built with TESSERA_QUANTIZED=OFF"

#define TESSERA_INSTANTIATE_PER_ISA(fixture) \
  INSTANTIATE_TEST_SUITE_P(Isa, fixture, ::testing::ValuesIn(tt::isas()), tt::isa_param_name)
