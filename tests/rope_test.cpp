// Rotary embeddings: the table's kernels (angles and rotation, both pairings) on their edge
// lattice against double arithmetic; tessera_rope and the layer's `rope` option against the
// reference on every table, at positions up to 10^6; bad arguments rejected with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/runtime/registry.hpp"
#include "tessera/attention.hpp"
#include "tessera/layers.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace rope_test {

namespace {

namespace arch = tessera::arch;
namespace ref = tessera::reference;
using tessera::Status;
using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;

constexpr float kGuard = -7777.0f;
constexpr double kU = 0x1p-24;  // float32's unit roundoff

double ulp_of(float x) {
  const float a = std::fabs(x);
  return double(std::nextafter(a, INFINITY)) - double(a);
}

// Each cosine and sine within half a float ulp (and a hair) of the double one; the layout of
// the style; nothing written past the table.
void test_angles(const KernelRow& row, bool gptj) {
  const auto fn = reinterpret_cast<void (*)(int64_t, const double*, double, float*)>(row.fn);
  int bad = 0;
  for (int64_t half : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 32, 33, 64}) {
    for (double theta : {10000.0, 500000.0}) {
      std::vector<double> freq(static_cast<size_t>(half));
      for (int64_t m = 0; m < half; ++m) freq[m] = std::pow(theta, -2.0 * double(m) / (2.0 * half));
      for (double pos : {0.0, 1.0, 3.0, 777.0, 65535.0, 123457.0, 999999.0, 1000000.0}) {
        const int64_t n = (gptj ? 4 : 2) * half;
        std::vector<float> cs(size_t(n + 5), kGuard);
        fn(half, freq.data(), pos, cs.data());
        for (int64_t i = n; i < n + 5; ++i)
          if (cs[i] != kGuard && ++bad <= 3) ADD_FAILURE() << row.name << " wrote past the table";
        for (int64_t m = 0; m < half; ++m) {
          const double t = pos * freq[m], c = std::cos(t), s = std::sin(t);
          const float got[4] = {gptj ? cs[2 * m] : cs[m], gptj ? cs[2 * m + 1] : cs[m],
                                gptj ? -cs[2 * half + 2 * m] : cs[half + m],
                                gptj ? cs[2 * half + 2 * m + 1] : cs[half + m]};
          const double want[4] = {c, c, s, s};
          for (int i = 0; i < 4; ++i) {
            const double bound = 0.5 * ulp_of(float(want[i])) * (1 + 0x1p-20) + 0x1p-45;
            if (!(std::fabs(double(got[i]) - want[i]) <= bound) && ++bad <= 3)
              ADD_FAILURE() << row.name << " half " << half << " pos " << pos << " m " << m << ": "
                            << got[i] << " for " << want[i];
          }
        }
      }
    }
  }
}

// Each rotated value within 3 float roundings of |a| + |b| of the exact turn of the stored
// pair by the stored cosine and sine; values past the pairs and between rows untouched.
void test_rotate(const KernelRow& row, bool gptj) {
  const auto fn =
      reinterpret_cast<void (*)(int64_t, int64_t, int64_t, const float*, float*)>(row.fn);
  std::mt19937 gen(uint32_t(gptj ? 7 : 3));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int bad = 0;
  for (int64_t half : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 64})
    for (int64_t heads : {1, 3}) {
      const int64_t rot = 2 * half, ld = rot + 1 + half % 3;  // a partial rotary's tail
      std::vector<float> c(static_cast<size_t>(half)), s(c), cs(static_cast<size_t>(2 * rot));
      for (int64_t m = 0; m < half; ++m) {
        const double t = 7.0 * u(gen);
        c[m] = float(std::cos(t)), s[m] = float(std::sin(t));
        if (gptj)
          cs[2 * m] = cs[2 * m + 1] = c[m], cs[rot + 2 * m] = -s[m], cs[rot + 2 * m + 1] = s[m];
        else
          cs[m] = c[m], cs[half + m] = s[m];
      }
      std::vector<float> x(size_t(heads * ld + 2), kGuard);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < rot; ++i)
          x[h * ld + i] = u(gen) * std::ldexp(1.0f, int(gen() % 9) - 4);
      const std::vector<float> before = x;
      fn(heads, ld, half, cs.data(), x.data());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = rot; i < ld; ++i)
          if (x[h * ld + i] != kGuard && ++bad <= 3) ADD_FAILURE() << row.name << " wrote past";
        for (int64_t m = 0; m < half; ++m) {
          const int64_t ia = h * ld + (gptj ? 2 * m : m),
                        ib = h * ld + (gptj ? 2 * m + 1 : m + half);
          const double a = before[ia], b = before[ib];
          const double wa = a * c[m] - b * s[m], wb = a * s[m] + b * c[m];
          const double bound = 3 * kU * (std::fabs(a) + std::fabs(b));
          if ((!(std::fabs(x[ia] - wa) <= bound) || !(std::fabs(x[ib] - wb) <= bound)) &&
              ++bad <= 3)
            ADD_FAILURE() << row.name << " half " << half << " head " << h << " pair " << m << ": "
                          << x[ia] << ", " << x[ib] << " for " << wa << ", " << wb;
        }
      }
      if (x[heads * ld] != kGuard || x[heads * ld + 1] != kGuard)
        if (++bad <= 3) ADD_FAILURE() << row.name << " wrote past the last row";
    }
}

TEST(RopeKernels, EveryRegisteredKernelOnItsEdgeLattice) {
  int seen = 0;
  for (const KernelRow& row : tessera::detail::kernel_registry()) {
    const auto f = row.family;
    if (f != KernelFamily::rope_angles_neox && f != KernelFamily::rope_angles_gptj &&
        f != KernelFamily::rope_rotate_neox && f != KernelFamily::rope_rotate_gptj)
      continue;
    SCOPED_TRACE(row.name);
    testers::rope_kernel(row);
    ++seen;
  }
  EXPECT_GE(seen, 4);
}

// ---- tessera_rope -------------------------------------------------------------------------

class Rope : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Rope);

// Each value within 4 float roundings of its pair's |a| + |b| of the reference (3 of the
// kernel's, one of the reference's own rounding), values past rot_dim unchanged.
void expect_rotated(const std::vector<float>& got, const std::vector<float>& want,
                    const std::vector<float>& before, int64_t rows, int64_t hd, int64_t rot,
                    bool gptj, const char* what) {
  int bad = 0;
  const int64_t half = rot / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hd; ++i) {
      const int64_t at = r * hd + i;
      if (i >= rot) {
        if (got[at] != before[at] && ++bad <= 3) ADD_FAILURE() << what << ": past rot_dim changed";
        continue;
      }
      const int64_t m = gptj ? i / 2 : i % half;
      const int64_t ia = r * hd + (gptj ? 2 * m : m), ib = r * hd + (gptj ? 2 * m + 1 : m + half);
      const double bound = 4 * kU * (std::fabs(before[ia]) + std::fabs(before[ib]));
      if (!(std::fabs(double(got[at]) - want[at]) <= bound) && ++bad <= 3)
        ADD_FAILURE() << what << " row " << r << " value " << i << ": " << got[at] << " for "
                      << want[at];
    }
}

TEST_P(Rope, BothStylesPartialAndPositionsToAMillionAgainstTheReference) {
  const int64_t B = 2, H = 3, S = 5;
  for (const int style : {TESSERA_ROPE_NEOX, TESSERA_ROPE_GPTJ})
    for (const int64_t hd : {6, 64, 80, 128})
      for (const int64_t rot : {int64_t(0), hd / 2 - (hd / 2) % 2}) {
        if (rot == 2 && hd == 6) continue;
        tessera_rope_desc r{};
        r.style = tessera_rope_style(style), r.rot_dim = rot;
        r.theta = hd == 80 ? 500000.0f : 0.0f, r.position_scale = hd == 128 ? 0.25f : 0.0f;
        const int64_t rd = rot ? rot : hd;
        // BHSD, and BSHD (the layer's: heads of a token side by side).
        for (const bool bshd : {false, true}) {
          const int64_t st[3] = {H * S * hd, bshd ? hd : S * hd, bshd ? H * hd : hd};
          std::vector<int64_t> pos(static_cast<size_t>(B * S));
          for (size_t i = 0; i < pos.size(); ++i) pos[i] = int64_t(i * 99991 % 1000001);
          pos.back() = 1000000;
          for (const bool given : {true, false}) {
            auto x = tt::random_vec(size_t(B * H * S * hd), uint32_t(hd + rot + style));
            const auto before = x;
            auto want = x;
            const int64_t start = 999990;
            for (int64_t b = 0; b < B; ++b)
              for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < S; ++i)
                  ref::rope_row(r, hd, double(given ? pos[b * S + i] : start + i),
                                &want[b * st[0] + h * st[1] + i * st[2]]);
            ASSERT_EQ(
                tessera::rope(r, B, H, S, hd, st, given ? pos.data() : nullptr, start, x.data()),
                Status::ok)
                << tessera::last_error();
            expect_rotated(x, want, before, B * H * S, hd, rd, style == TESSERA_ROPE_GPTJ,
                           (std::string(GetParam()) + (bshd ? " bshd" : " bhsd")).c_str());
          }
        }
      }
}

TEST(RopeApi, RejectsBadArgumentsAndWritesNothing) {
  const int64_t st[3] = {64, 16, 8};
  std::vector<float> x(64, 3.0f);
  const int64_t bad_pos[2] = {5, -1};
  struct Bad {
    const char* name;
    tessera_rope_desc r;
    int64_t hd;
    const int64_t* pos;
    int64_t start;
  };
  const tessera_rope_desc ok{TESSERA_ROPE_NEOX, 0, 0.0f, 0.0f};
  const Bad bads[] = {
      {"rope.style", {tessera_rope_style(3), 0, 0.0f, 0.0f}, 8, nullptr, 0},
      {"rope.rot_dim", {TESSERA_ROPE_NEOX, 3, 0.0f, 0.0f}, 8, nullptr, 0},
      {"rope.rot_dim", {TESSERA_ROPE_GPTJ, 10, 0.0f, 0.0f}, 8, nullptr, 0},
      {"rope.rot_dim", {TESSERA_ROPE_GPTJ, 0, 0.0f, 0.0f}, 7, nullptr, 0},
      {"rope.theta", {TESSERA_ROPE_NEOX, 0, 0.5f, 0.0f}, 8, nullptr, 0},
      {"rope.theta", {TESSERA_ROPE_NEOX, 0, NAN, 0.0f}, 8, nullptr, 0},
      {"rope.position_scale", {TESSERA_ROPE_NEOX, 0, 0.0f, -1.0f}, 8, nullptr, 0},
      {"positions[1]", ok, 8, bad_pos, 0},
      {"start", ok, 8, nullptr, -4},
  };
  for (const Bad& b : bads) {
    EXPECT_EQ(tessera_rope(&b.r, 1, 2, 2, b.hd, st, b.pos, b.start, x.data()),
              TESSERA_INVALID_ARGUMENT)
        << b.name;
    EXPECT_NE(std::string(tessera::last_error()).find(b.name), std::string::npos)
        << tessera::last_error();
    for (float v : x) ASSERT_EQ(v, 3.0f) << b.name;
  }
  EXPECT_EQ(tessera_rope(nullptr, 1, 2, 2, 8, st, nullptr, 0, x.data()), TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(tessera_rope(&ok, 1, 2, 2, 8, st, nullptr, 0, nullptr), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera::last_error()).find("x"), std::string::npos);
}

// ---- the layer's option ------------------------------------------------------------------

class RopeLayer : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(RopeLayer);

// Prefill then a decode step, GQA, both styles, partial rotary, a cache of each type, given and
// counted positions: the output and the cache's new rows against reference::mha_forward.
TEST_P(RopeLayer, PrefillAndDecodeWithACacheAgainstTheReference) {
  const int64_t M = 64, Hq = 4, Hk = 2, D = 32, cap = 24;
  std::vector<tessera_dtype> types = {TESSERA_F32, TESSERA_F16};
  if (tt::block_types_built()) types.push_back(TESSERA_Q8_0);
  uint32_t seed = 500;
  for (const tessera_dtype ct : types)
    for (const int style : {TESSERA_ROPE_NEOX, TESSERA_ROPE_GPTJ})
      for (const bool given : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "cache " << ct << " style " << style << " given " << given);
        tessera::MhaDesc d;
        ASSERT_EQ(tessera::mha_desc_init(d, 2, 1, 1, M, Hq), Status::ok);
        d.kv_heads = Hk, d.head_dim = d.value_dim = D, d.causal = 1;
        d.rope.style = tessera_rope_style(style),
        d.rope.rot_dim = style == TESSERA_ROPE_GPTJ ? 16 : 0;
        const auto wq = tt::random_vec(size_t(M * Hq * D), seed++, -0.2f, 0.2f);
        const auto wk = tt::random_vec(size_t(M * Hk * D), seed++, -0.2f, 0.2f);
        const auto wv = tt::random_vec(size_t(M * Hk * D), seed++, -0.2f, 0.2f);
        const auto wo = tt::random_vec(size_t(Hq * D * M), seed++, -0.2f, 0.2f);
        d.w_q = wq.data(), d.w_k = wk.data(), d.w_v = wv.data(), d.w_o = wo.data();
        const size_t row_bytes = ref::storage_bytes(ct, D);
        std::vector<char> kc(size_t(2 * Hk * cap) * row_bytes), vc = kc;
        std::vector<char> rk = kc, rv = kc;
        d.cache_type = ct, d.cache_capacity = cap;
        int64_t held = 0;
        for (const int64_t step : {int64_t(7), int64_t(1)}) {
          d.q_len = d.kv_len = step, d.cache_len = held;
          std::vector<int64_t> pos(static_cast<size_t>(2 * step));
          for (size_t i = 0; i < pos.size(); ++i) pos[i] = 1000000 - int64_t(31 * i);
          d.rope_positions = given ? pos.data() : nullptr;
          const auto x = tt::random_vec(size_t(2 * step * M), seed++);
          std::vector<float> out(size_t(2 * step * M), tt::kNaN), want(out.size());
          d.k_cache = kc.data(), d.v_cache = vc.data();
          ASSERT_EQ(tessera::mha_forward(d, x.data(), x.data(), out.data()), Status::ok)
              << tessera::last_error();
          tessera::MhaDesc r = d;
          r.k_cache = rk.data(), r.v_cache = rv.data();
          ref::mha_forward(r, x.data(), x.data(), want.data());
          // The keys were turned before they were stored: the new rows (and the values') match
          // the reference's within a rounding of the cache's type (a block type's within one
          // step of its scale).
          int64_t differ = 0;
          for (int64_t bh = 0; bh < 2 * Hk; ++bh)
            for (int64_t t = held; t < held + step; ++t)
              for (const bool v_side : {false, true}) {
                std::vector<float> a(static_cast<size_t>(D)), b(a);
                const size_t at = size_t(bh * cap + t) * row_bytes;
                const char* got = (v_side ? vc : kc).data() + at;
                const char* ref_row = (v_side ? rv : rk).data() + at;
                if (ct == TESSERA_Q8_0) {
                  ref::dequantize(ct, D, got, a.data());
                  ref::dequantize(ct, D, ref_row, b.data());
                } else {
                  for (int64_t c = 0; c < D; ++c)
                    a[c] = ref::element(ct, got, c), b[c] = ref::element(ct, ref_row, c);
                }
                double amax = 0;
                for (float v : b) amax = std::max(amax, double(std::fabs(v)));
                const double tol = ct == TESSERA_F32   ? 1e-5 * amax
                                   : ct == TESSERA_F16 ? 0x1p-10 * amax
                                                       : amax / 127.0 * 1.2;
                for (int64_t c = 0; c < D; ++c) {
                  ASSERT_LE(std::fabs(a[c] - b[c]), tol)
                      << (v_side ? "value" : "key") << " row " << t << " value " << c;
                  differ += a[c] != b[c];
                }
              }
          // The reference reads the rows the layer left and appends its own: where those round
          // as the layer's, the output is the float32 arithmetic's own error for every cache
          // type (4.1e-7 of the output's largest value on x86); a value rounded the other way
          // (an f16 one on neon64_v82: 1.0e-4) moves it by at most one rounding of the type. A
          // block-type cache also has the scores take the query rounded to q8_0 (tessera.h),
          // where a value at a halfway point may round either way from the layer's float32
          // projection and the reference's (2.4e-5 seen on SSE2 with other random data).
          const double rounding = ct == TESSERA_F32 ? 0.0 : ct == TESSERA_F16 ? 0x1p-10 : 1.0 / 127;
          const bool may_differ = differ > 0 || ct == TESSERA_Q8_0;
          EXPECT_LE(tt::rel_err(out, want), 1e-5 + (may_differ ? rounding : 0.0))
              << "step " << step << ", " << differ << " stored values rounded otherwise";
          // The reference's cache follows the layer's, so the next step starts from the same rows.
          rk = kc, rv = vc;
          held += step;
        }
      }
}

TEST(RopeLayerApi, RejectsBadOptionsAndWritesNothing) {
  tessera::MhaDesc d;
  ASSERT_EQ(tessera::mha_desc_init(d, 1, 2, 2, 8, 2), Status::ok);
  std::vector<float> w(64, 0.5f), x(16, 1.0f), out(16, 7.0f), kc(32, 3.0f), vc(32, 3.0f);
  d.w_q = d.w_k = d.w_v = d.w_o = w.data();
  d.k_cache = kc.data(), d.v_cache = vc.data(), d.cache_capacity = 4;
  const int64_t neg[2] = {0, -3};
  struct Bad {
    const char* name;
    void (*set)(tessera::MhaDesc&, const int64_t*);
  };
  const Bad bads[] = {
      {"desc->rope.style",
       [](tessera::MhaDesc& b, const int64_t*) { b.rope.style = tessera_rope_style(9); }},
      {"desc->rope.rot_dim",
       [](tessera::MhaDesc& b, const int64_t*) {
         b.rope.style = TESSERA_ROPE_NEOX, b.rope.rot_dim = 6;
       }},
      {"desc->q_len",
       [](tessera::MhaDesc& b, const int64_t*) { b.rope.style = TESSERA_ROPE_NEOX, b.kv_len = 1; }},
      {"desc->rope_positions[1]",
       [](tessera::MhaDesc& b, const int64_t* p) {
         b.rope.style = TESSERA_ROPE_GPTJ, b.rope_positions = p;
       }},
  };
  for (const Bad& b : bads) {
    tessera::MhaDesc bd = d;
    b.set(bd, neg);
    EXPECT_EQ(tessera::mha_forward(bd, x.data(), x.data(), out.data()), Status::invalid_argument)
        << b.name;
    EXPECT_NE(std::string(tessera::last_error()).find(b.name), std::string::npos)
        << tessera::last_error();
    for (float o : out) ASSERT_EQ(o, 7.0f);
    for (float k : kc) ASSERT_EQ(k, 3.0f);
  }
}

}  // namespace

}  // namespace rope_test

void testers::rope_kernel(const tessera::detail::KernelRow& row) {
  using namespace rope_test;
  switch (row.family) {
    case KernelFamily::rope_angles_neox:
      return test_angles(row, false);
    case KernelFamily::rope_angles_gptj:
      return test_angles(row, true);
    case KernelFamily::rope_rotate_neox:
      return test_rotate(row, false);
    case KernelFamily::rope_rotate_gptj:
      return test_rotate(row, true);
    default:
      FAIL() << row.name << " is not a rotary kernel";
  }
}
