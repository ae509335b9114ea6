// The block types' kernel families (arch/common/quant.hpp) over the registry, each on the edge
// lattice of its contract: the integer dot kernels against double sums of the stored integers
// and scales (keys of any int8, -128 included, and any nibbles), the dequantizing P V kernels
// across the groups of keys and blocks they split by, the quantizers bit for bit against the
// reference; a guard band around every output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/runtime/registry.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace quant_kernels_test {

namespace {

namespace arch = tessera::arch;
namespace ref = tessera::reference;
using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;

constexpr float kGuard = -7777.0f;

// rows rows of `blocks` random blocks of type t (0 q8_0, 1 q4_0), ld bytes apart: any bytes,
// finite scales of varied magnitude and sign.
std::vector<uint8_t> random_blocks(int t, int64_t rows, int64_t blocks, int64_t ld, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(size_t(rows * ld + 1));
  for (auto& x : b) x = uint8_t(gen());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < blocks; ++i) {
      const float d = std::ldexp(float(int(gen() % 200) - 100) / 100.0f, int(gen() % 6) - 3);
      const uint16_t h = ref::f32_to_f16(d);
      std::memcpy(&b[size_t(r * ld + i * arch::kQBlockBytes[t])], &h, 2);
    }
  return b;
}
float scale(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return ref::f16_to_f32(h);
}
int value(int t, const uint8_t* blk, int i) {
  return t == 0 ? int(int8_t(blk[2 + i])) : int((blk[2 + i % 16] >> (4 * (i / 16))) & 15) - 8;
}

void test_dot(const KernelRow& row, int t) {
  const auto fn = reinterpret_cast<arch::QuantDotFn>(row.fn);
  const int R = row.rows;
  std::mt19937 gen(uint32_t(R * 10 + t));
  int combo = 0;
  // Keys across the kernels' steps (2, 16) and their last partial step; blocks across the passes
  // and the GEMV kernels' chunks of 16 (whole, and with a tail).
  for (int64_t blocks : {1, 2, 3, 4, 8, 16, 17, 35})
    for (int64_t n : {1, 2, 3, 5, 8, 16, 17, 35}) {
      const int64_t D = blocks * 32, ldk = blocks * arch::kQBlockBytes[t] + (combo % 3) * 7;
      const float alpha = combo++ % 2 ? 0.125f : -1.0f;
      std::vector<int8_t> qs(size_t(R * D));
      std::vector<float> qd(size_t(R * blocks));
      for (auto& x : qs) x = int8_t(int(gen() % 255) - 127);  // quantize_rows' range
      for (auto& x : qd) x = ref::f16_to_f32(ref::f32_to_f16(float(int(gen() % 100)) / 64.0f));
      const auto k = random_blocks(t, n, blocks, ldk, uint32_t(combo));
      const int64_t lds = n + 3;
      std::vector<float> s(size_t((R + 2) * lds), kGuard);
      // Every other call with the blocks' sums given (the key loop's form), the others without.
      std::vector<int32_t> sums(size_t(R * blocks));
      for (size_t x = 0; x < sums.size(); ++x)
        for (int i = 0; i < 32; ++i) sums[x] += qs[x * 32 + i];
      arch::QuantRows q{qs.data(), qd.data(), D, blocks};
      if (combo % 2) q.sums = sums.data();
      fn(q, k.data(), ldk, n, s.data() + lds, lds, alpha);
      int bad = 0;
      for (int64_t r = -1; r <= R; ++r)
        for (int64_t j = 0; j < lds; ++j) {
          const float got = s[size_t((r + 1) * lds + j)];
          if (r < 0 || r == R || j >= n) {
            if (got != kGuard && ++bad <= 3) ADD_FAILURE() << row.name << ": wrote outside S";
            continue;
          }
          double want = 0, mag = 0;
          for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* blk = k.data() + j * ldk + b * arch::kQBlockBytes[t];
            int64_t isum = 0, iabs = 0;
            for (int i = 0; i < 32; ++i) {
              const int64_t prod = int64_t(qs[size_t(r * D + b * 32 + i)]) * value(t, blk, i);
              isum += prod, iabs += prod < 0 ? -prod : prod;
            }
            const double sc = double(qd[size_t(r * blocks + b)]) * scale(blk);
            want += sc * double(isum), mag += std::fabs(sc) * double(iabs);
          }
          want *= alpha, mag *= std::fabs(alpha);
          // The integer lanes are exact; each lane's product with the (exact) product of the
          // scales, the lanes' and the blocks' sums and alpha round in float32: within 16 + blocks
          // roundings of the sum of |products|.
          const double bound = double(16 + blocks) * 0x1p-24 * mag + 1e-30;
          if (!(std::fabs(got - want) <= bound) && ++bad <= 3)
            ADD_FAILURE() << row.name << ": S(" << r << ", " << j << ") = " << got << ", want "
                          << want << " (blocks " << blocks << ", n " << n << ")";
        }
      // The streamed hint and the rows named for prefetches (other keys, which a kernel that
      // read them would sum) move prefetches only: the same bits.
      std::vector<float> s2(s.size(), kGuard);
      const auto other = random_blocks(t, n, blocks, ldk, uint32_t(combo + 1000));
      arch::QuantRows hinted{qs.data(), qd.data(), D, blocks, true};
      hinted.next = {other.data(), n, other.data(), n, combo % 3 == 0};
      fn(hinted, k.data(), ldk, n, s2.data() + lds, lds, alpha);
      if (std::memcmp(s.data(), s2.data(), s.size() * sizeof(float)) != 0)
        ADD_FAILURE() << row.name << ": the prefetch hints changed S (blocks " << blocks << ", n "
                      << n << ")";
      if (::testing::Test::HasFailure()) return;
    }
}

void test_pv(const KernelRow& row, int t) {
  const auto fn = reinterpret_cast<arch::QuantPvFn>(row.fn);
  const int R = row.rows;
  int combo = 0;
  // Keys across the kernel's groups of 32, blocks across its passes of 8.
  for (int64_t blocks : {1, 2, 4, 9})
    for (int64_t n : {0, 1, 3, 31, 33, 70}) {
      const int64_t Dv = blocks * 32, ldv = blocks * arch::kQBlockBytes[t] + (combo % 2) * 5;
      const int64_t ldp = n + 2, ldo = Dv + 3;
      const auto v = random_blocks(t, n, blocks, ldv, uint32_t(combo));
      const auto p = tt::random_vec(size_t(R * ldp + 1), uint32_t(combo + 50), 0.0f, 1.0f);
      std::vector<float> o(size_t((R + 2) * ldo), kGuard);
      const auto o0 = tt::random_vec(size_t(R * Dv), uint32_t(combo + 90));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < Dv; ++c) o[size_t((r + 1) * ldo + c)] = o0[size_t(r * Dv + c)];
      ++combo;
      // The rows after the call's and those to spread named (for its prefetches): other V
      // rows, which it must not read.
      const auto other = random_blocks(t, n, blocks, ldv, uint32_t(combo + 1000));
      fn(n, p.data(), ldp, v.data(), ldv, blocks, o.data() + ldo, ldo,
         {other.data(), n, other.data(), n, combo % 2 == 0});
      int bad = 0;
      for (int64_t r = -1; r <= R; ++r)
        for (int64_t c = 0; c < ldo; ++c) {
          const float got = o[size_t((r + 1) * ldo + c)];
          if (r < 0 || r == R || c >= Dv) {
            if (got != kGuard && ++bad <= 3) ADD_FAILURE() << row.name << ": wrote outside O";
            continue;
          }
          double want = o0[size_t(r * Dv + c)], mag = std::fabs(want);
          for (int64_t j = 0; j < n; ++j) {
            const uint8_t* blk = v.data() + j * ldv + c / 32 * arch::kQBlockBytes[t];
            // p times the scale is rounded once in float32 (the kernel's pd), then the FMA.
            const double term = double(float(p[size_t(r * ldp + j)] * scale(blk))) *
                                double(value(t, blk, int(c % 32)));
            want += term, mag += std::fabs(term);
          }
          const double bound = double(n + 2) * 0x1p-24 * mag + 1e-30;
          if (!(std::fabs(got - want) <= bound) && ++bad <= 3)
            ADD_FAILURE() << row.name << ": O(" << r << ", " << c << ") = " << got << ", want "
                          << want << " (blocks " << blocks << ", n " << n << ")";
        }
      if (::testing::Test::HasFailure()) return;
    }
}

// Inputs of the quantizers: random blocks of varied scale, the largest value at every position,
// ties of the rounding, zeros and non-finite blocks.
std::vector<float> quantizer_inputs() {
  std::vector<float> x = tt::random_vec(32 * 40, 11, -2.0f, 2.0f);
  for (int b = 0; b < 40; ++b)
    for (int j = 0; j < 32; ++j) x[size_t(b * 32 + j)] *= std::ldexp(1.0f, b % 11 - 5);
  for (int pos = 0; pos < 32; ++pos) {
    std::vector<float> blk = tt::random_vec(32, 200 + pos);
    blk[size_t(pos)] = pos % 2 ? 3.0f : -3.0f;
    x.insert(x.end(), blk.begin(), blk.end());
  }
  for (int j = 0; j < 32; ++j) x.push_back(j == 0 ? 127.0f : float(j) - 15.5f);
  x.insert(x.end(), 32, 0.0f);
  std::vector<float> special(32, 1.0f);
  special[9] = std::numeric_limits<float>::quiet_NaN();
  x.insert(x.end(), special.begin(), special.end());
  special[9] = -std::numeric_limits<float>::infinity();
  x.insert(x.end(), special.begin(), special.end());
  const std::vector<float> near = tt::q4_0_contraction_blocks();
  x.insert(x.end(), near.begin(), near.end());
  return x;
}

void test_quantize(const KernelRow& row, int t) {
  const auto fn = reinterpret_cast<void (*)(int64_t, const float*, uint8_t*)>(row.fn);
  const auto x = quantizer_inputs();
  const tessera_dtype type = t == 0 ? TESSERA_Q8_0 : TESSERA_Q4_0;
  for (int64_t blocks : {int64_t(0), int64_t(1), int64_t(3), int64_t(x.size() / 32)}) {
    const size_t bytes = size_t(blocks * arch::kQBlockBytes[t]);
    std::vector<uint8_t> want(bytes + 1), got(bytes + 16, 0xA5);
    ref::quantize(type, blocks * 32, x.data() + x.size() - size_t(blocks * 32), want.data());
    fn(blocks * 32, x.data() + x.size() - size_t(blocks * 32), got.data());
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(got[i], want[i]) << row.name << ": byte " << i << " of " << blocks << " blocks";
    for (size_t i = bytes; i < got.size(); ++i) ASSERT_EQ(got[i], 0xA5) << row.name;
  }
}

void test_dequantize(const KernelRow& row, int t) {
  const auto fn = reinterpret_cast<void (*)(int64_t, const uint8_t*, float*)>(row.fn);
  const tessera_dtype type = t == 0 ? TESSERA_Q8_0 : TESSERA_Q4_0;
  for (int64_t blocks : {0, 1, 2, 7, 33}) {
    const auto b = random_blocks(t, blocks, 1, arch::kQBlockBytes[t], uint32_t(blocks + 7));
    std::vector<float> want(size_t(blocks * 32) + 1), got(size_t(blocks * 32) + 16, kGuard);
    ref::dequantize(type, blocks * 32, b.data(), want.data());
    fn(blocks * 32, b.data(), got.data());
    for (int64_t i = 0; i < blocks * 32; ++i)
      ASSERT_EQ(std::memcmp(&got[size_t(i)], &want[size_t(i)], 4), 0)
          << row.name << ": value " << i << " = " << got[size_t(i)] << ", want " << want[size_t(i)];
    for (size_t i = size_t(blocks * 32); i < got.size(); ++i) ASSERT_EQ(got[i], kGuard) << row.name;
  }
}

void test_quantize_rows(const KernelRow& row) {
  using Fn = void (*)(int64_t, int64_t, const float*, int64_t, int8_t*, float*);
  const auto fn = reinterpret_cast<Fn>(row.fn);
  const auto inputs = quantizer_inputs();
  // From the inputs' start (random blocks of every scale), and from their end (the ties, zeros
  // and non-finite blocks).
  for (int from_end = 0; from_end < 2; ++from_end)
    for (int64_t rows : {1, 3, 5})
      for (int64_t d : {32, 64, 160}) {
        const int64_t ldx = d + 5;
        const float* x = inputs.data() + from_end * (int64_t(inputs.size()) - rows * ldx);
        std::vector<int8_t> qs(size_t(rows * d) + 8, 0x5A);
        std::vector<float> sc(size_t(rows * d / 32) + 4, kGuard);
        fn(rows, d, x, ldx, qs.data(), sc.data());
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<uint8_t> want(size_t(d / 32 * 34));
          ref::quantize(TESSERA_Q8_0, d, x + r * ldx, want.data());
          for (int64_t b = 0; b < d / 32; ++b) {
            const float ws = scale(&want[size_t(b * 34)]);
            ASSERT_EQ(std::memcmp(&sc[size_t(r * (d / 32) + b)], &ws, 4), 0) << row.name;
            for (int i = 0; i < 32; ++i)
              ASSERT_EQ(uint8_t(qs[size_t(r * d + b * 32 + i)]), want[size_t(b * 34 + 2 + i)])
                  << row.name << ": row " << r << " block " << b << " value " << i;
          }
        }
        for (size_t i = size_t(rows * d); i < qs.size(); ++i) ASSERT_EQ(qs[i], 0x5A) << row.name;
        for (size_t i = size_t(rows * d / 32); i < sc.size(); ++i)
          ASSERT_EQ(sc[i], kGuard) << row.name;
      }
}

TEST(QuantKernels, EveryRegisteredKernelOnItsEdgeLattice) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  int tested = 0;
  for (const KernelRow& row : tessera::detail::kernel_registry()) {
    if (row.family < KernelFamily::quant_dot_q8_0 ||
        row.family > KernelFamily::quant_gemm_pack_q4_0)
      continue;
    SCOPED_TRACE(row.name);
    testers::quant_kernel(row);
    ++tested;
    if (HasFailure()) return;
  }
  EXPECT_GT(tested, 0);
}

}  // namespace

}  // namespace quant_kernels_test

void testers::quant_kernel(const tessera::detail::KernelRow& row) {
  using namespace quant_kernels_test;
  switch (row.family) {
    case KernelFamily::quant_dot_q8_0:
      return test_dot(row, 0);
    case KernelFamily::quant_dot_q4_0:
      return test_dot(row, 1);
    case KernelFamily::quant_pv_q8_0:
      return test_pv(row, 0);
    case KernelFamily::quant_pv_q4_0:
      return test_pv(row, 1);
    case KernelFamily::quantize_q8_0:
      return test_quantize(row, 0);
    case KernelFamily::quantize_q4_0:
      return test_quantize(row, 1);
    case KernelFamily::dequantize_q8_0:
      return test_dequantize(row, 0);
    case KernelFamily::dequantize_q4_0:
      return test_dequantize(row, 1);
    case KernelFamily::quantize_rows_q8_0:
      return test_quantize_rows(row);
    case KernelFamily::quant_gemm_q8_0:
    case KernelFamily::quant_gemm_q4_0:
    case KernelFamily::quant_gemm_pack_q8_0:
    case KernelFamily::quant_gemm_pack_q4_0:
      return testers::quant_gemm_kernel(row);
    default:
      FAIL() << row.name << " is not a kernel of the block types";
  }
}
