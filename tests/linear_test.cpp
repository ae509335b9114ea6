// The prepared linear and feed-forward layers on every table and weight type, against the
// reference within the bounds of the products they run (tessera.h: tessera_sgemm's, and
// tessera_gemm_ex's for the block types), and their bad arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "src/runtime/scratch.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"

namespace linear_test {

namespace {

namespace ref = tessera::reference;
constexpr double kU = 0x1p-24;
constexpr tessera_dtype kTypes[] = {TESSERA_F32, TESSERA_F16, TESSERA_BF16, TESSERA_Q8_0,
                                    TESSERA_Q4_0};

bool is_block(tessera_dtype t) { return t == TESSERA_Q8_0 || t == TESSERA_Q4_0; }

// n x k weights of type t, and the values they hold widened to float.
struct Weights {
  std::vector<char> stored;
  std::vector<float> values;
};
Weights make_weights(tessera_dtype t, int64_t n, int64_t k, uint32_t seed) {
  const auto f = tt::random_vec(size_t(n * k), seed, -0.2f, 0.2f);
  Weights w;
  w.stored.resize(tessera_dtype_size(t, n * k));
  EXPECT_EQ(tessera_convert(TESSERA_F32, t, n * k, f.data(), w.stored.data()), TESSERA_OK);
  w.values.resize(f.size());
  if (is_block(t))
    ref::dequantize(t, n * k, w.stored.data(), w.values.data());
  else
    for (int64_t i = 0; i < n * k; ++i) w.values[size_t(i)] = ref::element(t, w.stored.data(), i);
  return w;
}

// x's rows as the block types' products read them (rounded to q8_0), else as they are.
std::vector<float> as_read(tessera_dtype t, const std::vector<float>& x) {
  if (!is_block(t)) return x;
  std::vector<char> q(tessera_dtype_size(TESSERA_Q8_0, int64_t(x.size())));
  std::vector<float> out(x.size());
  ref::quantize(TESSERA_Q8_0, int64_t(x.size()), x.data(), q.data());
  ref::dequantize(TESSERA_Q8_0, int64_t(x.size()), q.data(), out.data());
  return out;
}

// The error a product of x (rows x k, as read) and W^T (n x k) may have at (i, j): sgemm's
// float32 sums, or tessera_gemm_ex's bound for block types; S = sum |x W|.
double product_bound(tessera_dtype t, int64_t k, const float* x, const float* w) {
  double s = 0;
  for (int64_t p = 0; p < k; ++p) s += std::fabs(double(x[p]) * w[p]);
  return (is_block(t) ? double(k / 32 + 16) : double(k + 4)) * kU * s;
}

class Linear : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Linear);

TEST_P(Linear, EveryWeightTypeOneRowToManyWithBiasAndBeta) {
  const int64_t in = 96, out = 72;
  for (const tessera_dtype t : kTypes) {
    if (is_block(t) && !tt::block_types_built()) continue;
    const Weights w = make_weights(t, out, in, uint32_t(t) + 1);
    const auto bias = tt::random_vec(size_t(out), 3);
    for (const bool with_bias : {false, true}) {
      tessera_linear* lin = nullptr;
      const tessera_linear_desc d{in, out, t, w.stored.data(), with_bias ? bias.data() : nullptr};
      ASSERT_EQ(tessera_linear_create(&d, &lin), TESSERA_OK) << tessera_last_error();
      for (const int64_t rows : {1, 4, 37}) {
        const float beta = rows == 4 ? 1.0f : 0.0f;
        const auto x = tt::random_vec(size_t(rows * in), uint32_t(rows));
        const auto y0 = tt::random_vec(size_t(rows * out), 4);
        auto y = y0, want = y0;
        ASSERT_EQ(tessera_linear_forward(lin, rows, x.data(), in, beta, y.data(), out), TESSERA_OK)
            << tessera_last_error();
        ref::linear(d, rows, x.data(), in, beta, want.data(), out);
        const auto xr = as_read(t, x);
        int bad = 0;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < out; ++j) {
            const size_t at = size_t(i * out + j);
            const double bound =
                product_bound(t, in, &xr[size_t(i * in)], &w.values[size_t(j * in)]) +
                4 * kU * (std::fabs(want[at]) + std::fabs(bias[size_t(j)]) + std::fabs(y0[at]));
            if (!(std::fabs(double(y[at]) - want[at]) <= bound) && ++bad <= 3)
              ADD_FAILURE() << tessera_dtype_size(t, 32) << "-byte type, rows " << rows << " (" << i
                            << ", " << j << "): " << y[at] << " for " << want[at];
          }
      }
      tessera_linear_destroy(lin);
    }
  }
}

TEST_P(Linear, BadArgumentsNamedAndNothingWritten) {
  const Weights w = make_weights(TESSERA_F32, 8, 64, 1);
  tessera_linear_desc d{64, 8, TESSERA_Q4_0, w.stored.data(), nullptr};
  tessera_linear* lin = nullptr;
  d.in_features = 48;
  if (tt::block_types_built()) {
    EXPECT_EQ(tessera_linear_create(&d, &lin), TESSERA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tessera_last_error()).find("in_features"), std::string::npos);
  }
  d = {64, 8, tessera_dtype(17), w.stored.data(), nullptr};
  EXPECT_EQ(tessera_linear_create(&d, &lin), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("weight_type"), std::string::npos);
  d = {64, 8, TESSERA_F32, nullptr, nullptr};
  EXPECT_EQ(tessera_linear_create(&d, &lin), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("weight"), std::string::npos);
  EXPECT_EQ(lin, nullptr);
  d = {64, 8, TESSERA_F32, w.stored.data(), nullptr};
  ASSERT_EQ(tessera_linear_create(&d, &lin), TESSERA_OK);
  std::vector<float> x(2 * 64, 1.0f), y(2 * 8, 7.0f);
  EXPECT_EQ(tessera_linear_forward(lin, 2, x.data(), 63, 0.0f, y.data(), 8),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("ldx"), std::string::npos);
  EXPECT_EQ(tessera_linear_forward(lin, 2, x.data(), 64, 0.0f, x.data() + 8, 8),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("y"), std::string::npos);
  EXPECT_EQ(tessera_linear_forward(lin, -1, x.data(), 64, 0.0f, y.data(), 8),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("rows"), std::string::npos);
  for (const float v : y) ASSERT_EQ(v, 7.0f);
  for (const float v : x) ASSERT_EQ(v, 1.0f);
  tessera_linear_destroy(lin);
}

// ---- the feed-forward layer ---------------------------------------------------------------

double act(tessera_activation a, double g) {
  if (a == TESSERA_ACT_SILU) return g / (1 + std::exp(-g));
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * g * (1 + std::tanh(c * (g + 0.044715 * g * g * g)));
}

// The bound on the layer's y against ref::ffn: the gate and up products' errors carried through
// the activation (|f'| <= 1.2 for both), the activation's own (tessera_glu's, 16 u), and the
// down product's; for a block type also one q8_0 step of each hidden value that lies within
// 2^-10 of a rounding point (the layer's value and the reference's may round apart there), and
// of a whole block whose scale lies that near an f16 rounding point.
std::vector<double> ffn_bounds(const tessera_ffn_desc& d, const Weights& wg, const Weights& wu,
                               const Weights& wd, int64_t rows, const std::vector<float>& x) {
  const int64_t D = d.dim, H = d.hidden;
  const auto xr = as_read(d.weight_type, x);
  std::vector<float> g(size_t(rows * H)), u(g.size()), a(g.size());
  std::vector<double> ea(g.size()), out(size_t(rows * D));
  ref::linear({D, H, d.weight_type, d.w_up, d.b_up}, rows, x.data(), D, 0.0f, u.data(), H);
  if (d.gated)
    ref::linear({D, H, d.weight_type, d.w_gate, d.b_gate}, rows, x.data(), D, 0.0f, g.data(), H);
  for (int64_t i = 0; i < rows * H; ++i) {
    const int64_t r = i / H, p = i % H;
    const double eu =
        product_bound(d.weight_type, D, &xr[size_t(r * D)], &wu.values[size_t(p * D)]) +
        kU * std::fabs(u[size_t(i)]);
    if (d.gated) {
      const double eg =
          product_bound(d.weight_type, D, &xr[size_t(r * D)], &wg.values[size_t(p * D)]) +
          kU * std::fabs(g[size_t(i)]);
      a[size_t(i)] = float(act(d.activation, g[size_t(i)]) * u[size_t(i)]);
      ea[size_t(i)] =
          1.2 * eg * std::fabs(u[size_t(i)]) + std::fabs(act(d.activation, g[size_t(i)])) * eu;
    } else {
      a[size_t(i)] = float(act(d.activation, u[size_t(i)]));
      ea[size_t(i)] = 1.2 * eu;
    }
    ea[size_t(i)] += 16 * kU * std::fabs(a[size_t(i)]) + 1e-30;
  }
  if (is_block(d.weight_type))
    for (int64_t b = 0; b < rows * H / 32; ++b) {
      double amax = 0;
      for (int64_t q = 0; q < 32; ++q)
        amax = std::max(amax, double(std::fabs(a[size_t(b * 32 + q)])));
      const double step = amax / 127;
      // the scale's f16 rounding point: within 2^-10 of half an f16 ulp of amax / 127
      const double ulp = std::ldexp(1.0, std::ilogb(step > 0 ? step : 1) - 10);
      const double fr = std::fmod(step / ulp, 1.0);
      const bool scale_near = std::fabs(fr - 0.5) < 0x1p-10;
      for (int64_t q = 0; q < 32; ++q) {
        const size_t i = size_t(b * 32 + q);
        const double v = step > 0 ? std::fabs(a[i]) / step : 0;
        const bool near = std::fabs(std::fmod(v, 1.0) - 0.5) < 0x1p-10 + ea[i] / (step + 1e-30);
        if (near || scale_near) ea[i] += step * 1.01 + (scale_near ? 0x1p-9 * std::fabs(a[i]) : 0);
      }
    }
  const auto ar = as_read(d.weight_type, a);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < D; ++j) {
      double e = product_bound(d.weight_type, H, &ar[size_t(r * H)], &wd.values[size_t(j * H)]);
      for (int64_t p = 0; p < H; ++p)
        e += ea[size_t(r * H + p)] * std::fabs(wd.values[size_t(j * H + p)]) * 1.01;
      out[size_t(r * D + j)] = e;
    }
  return out;
}

TEST_P(Linear, FeedForwardGatedAndNotEveryWeightTypeAgainstTheReference) {
  const int64_t D = 64, H = 96;
  for (const tessera_dtype t : kTypes) {
    if (is_block(t) && !tt::block_types_built()) continue;
    const Weights wg = make_weights(t, H, D, 11), wu = make_weights(t, H, D, 12),
                  wd = make_weights(t, D, H, 13);
    const auto bg = tt::random_vec(size_t(H), 14), bd = tt::random_vec(size_t(D), 15);
    for (const auto a : {TESSERA_ACT_SILU, TESSERA_ACT_GELU_TANH})
      for (const int gated : {1, 0}) {
        const tessera_ffn_desc d{D,
                                 H,
                                 a,
                                 gated,
                                 t,
                                 wg.stored.data(),
                                 wu.stored.data(),
                                 wd.stored.data(),
                                 bg.data(),
                                 nullptr,
                                 bd.data()};
        tessera_ffn* ffn = nullptr;
        ASSERT_EQ(tessera_ffn_create(&d, &ffn), TESSERA_OK) << tessera_last_error();
        for (const int64_t rows : {1, 9}) {
          const auto x = tt::random_vec(size_t(rows * D), uint32_t(rows + 20), -2.0f, 2.0f);
          const auto y0 = tt::random_vec(size_t(rows * D), 21);
          auto y = y0, want = y0;
          std::vector<float> ws(tessera_ffn_workspace_size(ffn, rows) / 4 + 16);
          void* aligned =
              reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) / 64 * 64);
          ASSERT_EQ(tessera_ffn_forward(ffn, rows, x.data(), D, 1.0f, y.data(), D,
                                        rows == 1 ? nullptr : aligned,
                                        rows == 1 ? 0 : tessera_ffn_workspace_size(ffn, rows)),
                    TESSERA_OK)
              << tessera_last_error();
          ref::ffn(d, rows, x.data(), D, 1.0f, want.data(), D);
          const auto bound = ffn_bounds(d, wg, wu, wd, rows, x);
          int bad = 0;
          for (size_t i = 0; i < y.size(); ++i) {
            const double b = bound[i] + 4 * kU * (std::fabs(want[i]) + std::fabs(y0[i]) + 1);
            if (!(std::fabs(double(y[i]) - want[i]) <= b) && ++bad <= 3)
              ADD_FAILURE() << "type " << int(t) << " act " << int(a) << " gated " << gated
                            << " rows " << rows << " at " << i << ": " << y[i] << " for " << want[i]
                            << " within " << b;
          }
        }
        tessera_ffn_destroy(ffn);
      }
  }
}

TEST_P(Linear, FeedForwardBadArgumentsNamedAndNothingWritten) {
  const Weights w = make_weights(TESSERA_F32, 64, 64, 1);
  tessera_ffn_desc d{64,          64,      TESSERA_ACT_SILU, 1,
                     TESSERA_F32, nullptr, w.stored.data(),  w.stored.data(),
                     nullptr,     nullptr, nullptr};
  tessera_ffn* ffn = nullptr;
  EXPECT_EQ(tessera_ffn_create(&d, &ffn), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("w_gate"), std::string::npos);
  d.w_gate = w.stored.data(), d.activation = tessera_activation(4);
  EXPECT_EQ(tessera_ffn_create(&d, &ffn), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("activation"), std::string::npos);
  d.activation = TESSERA_ACT_SILU, d.hidden = 0;
  EXPECT_EQ(tessera_ffn_create(&d, &ffn), TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("hidden"), std::string::npos);
  EXPECT_EQ(ffn, nullptr);
  d.hidden = 64;
  ASSERT_EQ(tessera_ffn_create(&d, &ffn), TESSERA_OK);
  std::vector<float> x(2 * 64, 1.0f), y(2 * 64, 7.0f);
  alignas(64) static float small[16];
  EXPECT_EQ(tessera_ffn_forward(ffn, 2, x.data(), 64, 1.0f, y.data(), 64, small, sizeof small),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("workspace_bytes"), std::string::npos);
  EXPECT_EQ(tessera_ffn_forward(ffn, 2, x.data(), 64, 1.0f, y.data(), 32, nullptr, 0),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("ldy"), std::string::npos);
  for (const float v : y) ASSERT_EQ(v, 7.0f);
  tessera_ffn_destroy(ffn);
}

#ifdef __linux__
// A prepared layer's weights from 2 MB on sit on memory nothing touched before the huge-page
// advice: the heap hands back freed blocks already faulted in as 4 KB pages, which the advice
// does not remap, and a decode step would stream them through the TLB a 4 KB page at a time.
TEST(LongLived, WeightsFromTwoMegabytesOnUntouchedAlignedMemory) {
  // A freed block of the heap, touched: glibc serves the next large allocations from it.
  for (const size_t mb : {16, 15}) {
    auto* p = static_cast<char*>(std::malloc(mb << 20));
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, mb << 20);
    std::free(p);
  }
  const size_t bytes = size_t(6) << 20, page = size_t(sysconf(_SC_PAGESIZE));
  tessera::detail::LongLived block;
  ASSERT_TRUE(block.allocate(bytes));
  auto* p = static_cast<unsigned char*>(block.data());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20), 0u);
  std::vector<unsigned char> resident(bytes / page);
  ASSERT_EQ(mincore(p, bytes, resident.data()), 0);
  EXPECT_EQ(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; }),
            0)
      << "pages of the block were faulted in before the advice";
  std::memset(p, 7, bytes);
  EXPECT_EQ(p[bytes - 1], 7);
  ASSERT_TRUE(block.allocate(1000));  // below 2 MB: the heap, 64-byte aligned
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % 64, 0u);
}
#endif

}  // namespace

}  // namespace linear_test
