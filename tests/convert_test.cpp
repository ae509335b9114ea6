// The conversion kernels of every table this CPU runs (the registry's convert_* rows) against
// the reference bit for bit: every f16 and bf16 value widened; every f32 value at and around
// each rounding boundary narrowed (the low bits that are dropped at 0, 1, just under and over
// half, half, and all ones, under every pattern of the kept bits); and every length up to past
// the widest vector, at every alignment, so that each kernel's vector body and tail both run.
// Then tessera_convert's contract: argument checks, aliasing, f16 <-> bf16, parallel chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "src/runtime/registry.hpp"
#include "tessera/convert.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace convert_test {

namespace {

using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;
namespace ref = tessera::reference;

using Narrow = void (*)(int64_t, const float*, uint16_t*);
using Widen = void (*)(int64_t, const uint16_t*, float*);

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// f32 inputs around every rounding boundary of a format that drops `dropped` low bits.
std::vector<float> boundary_inputs(int dropped) {
  const uint32_t half = 1u << (dropped - 1), all = (1u << dropped) - 1;
  const uint32_t lows[] = {0, 1, half - 1, half, half + 1, all};
  std::vector<float> x;
  for (uint32_t high = 0; high < (1u << (32 - dropped)); ++high)
    for (uint32_t low : lows) x.push_back(from_bits(high << dropped | low));
  return x;
}

void test_narrow(const KernelRow& row, bool f16) {
  const auto fn = reinterpret_cast<Narrow>(row.fn);
  const auto spec = f16 ? &ref::f32_to_f16 : &ref::f32_to_bf16;
  // f16 keeps 10 of the 23 mantissa bits; for the f16 sweep the kept bits' every pattern is 2^19
  // (sign, exponent and the top 10 mantissa bits): the boundaries of every binade.
  const std::vector<float> x = boundary_inputs(f16 ? 13 : 16);
  std::vector<uint16_t> y(x.size());
  fn(int64_t(x.size()), x.data(), y.data());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(y[i], spec(x[i])) << row.name << ": input bits 0x" << std::hex << bits(x[i]);
  // Every length to 40 at every offset of a 64-byte line: bodies, tails, and nothing past n.
  for (int64_t n = 0; n <= 40; ++n)
    for (int64_t off = 0; off < 16; ++off) {
      std::vector<uint16_t> out(size_t(n + 40), 0xABCD);
      fn(n, x.data() + 1000 + off, out.data() + off);
      for (int64_t i = 0; i < n + 40; ++i) {
        const bool inside = i >= off && i < off + n;
        ASSERT_EQ(out[size_t(i)], inside ? spec(x[size_t(1000 + i)]) : 0xABCD)
            << row.name << " n " << n << " offset " << off << " element " << i;
      }
    }
}

void test_widen(const KernelRow& row, bool f16) {
  const auto fn = reinterpret_cast<Widen>(row.fn);
  const auto spec = f16 ? &ref::f16_to_f32 : &ref::bf16_to_f32;
  std::vector<uint16_t> x(65536 + 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(i);
  std::vector<float> y(x.size());
  for (int64_t off = 0; off < 16; ++off) {  // every value, at 16 alignments
    fn(65536, x.data() + off, y.data());
    for (size_t i = 0; i < 65536; ++i)
      ASSERT_EQ(bits(y[i]), bits(spec(x[i + size_t(off)])))
          << row.name << ": input 0x" << std::hex << x[i + size_t(off)];
  }
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> out(size_t(n + 8), -3.0f);
    fn(n, x.data() + 31744, out.data());  // from 0x7C00: inf, then NaNs
    for (int64_t i = 0; i < n + 8; ++i)
      ASSERT_EQ(bits(out[size_t(i)]), bits(i < n ? spec(uint16_t(31744 + i)) : -3.0f))
          << row.name << " n " << n;
  }
}

}  // namespace

}  // namespace convert_test

// The conversions' tester (a registered convert_* kernel against the reference, bit for bit).
void testers::convert_kernel(const tessera::detail::KernelRow& row) {
  using namespace convert_test;
  switch (row.family) {
    case KernelFamily::convert_f32_f16:
      return test_narrow(row, true);
    case KernelFamily::convert_f32_bf16:
      return test_narrow(row, false);
    case KernelFamily::convert_f16_f32:
      return test_widen(row, true);
    case KernelFamily::convert_bf16_f32:
      return test_widen(row, false);
    default:
      FAIL() << row.name << " is not a conversion";
  }
}

namespace convert_test {

namespace {

TEST(Convert, EveryRegisteredKernelMatchesTheReferenceBitForBit) {
  int tested = 0;
  for (const KernelRow& row : tessera::detail::kernel_registry()) {
    if (row.family < KernelFamily::convert_f32_f16 || row.family > KernelFamily::convert_bf16_f32)
      continue;
    testers::convert_kernel(row);
    ++tested;
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(tested, 4 * int(tt::all_isas().size()));
}

// The specification itself, at the values its rules name.
TEST(Convert, ReferenceAtTheNamedValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ref::f32_to_f16(65504.0f), 0x7BFF);    // the largest half
  EXPECT_EQ(ref::f32_to_f16(65519.996f), 0x7BFF);  // under the halfway point
  EXPECT_EQ(ref::f32_to_f16(65520.0f), 0x7C00);    // halfway: to even, which is inf
  EXPECT_EQ(ref::f32_to_f16(-inf), 0xFC00);
  EXPECT_EQ(ref::f32_to_f16(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(ref::f32_to_f16(0x1p-25f), 0x0000);  // half of it: to even, zero
  EXPECT_EQ(ref::f32_to_f16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(ref::f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(ref::f32_to_f16(1.0f + 0x1p-11f), 0x3C00);  // 1 + half an ulp: to even (1)
  EXPECT_EQ(ref::f32_to_f16(1.0f + 0x1.8p-11f), 0x3C01);
  EXPECT_EQ(ref::f32_to_f16(from_bits(0x7F800001)), 0x7E00);  // a signalling NaN, quieted
  EXPECT_EQ(ref::f16_to_f32(0x3555), 1365.0f * 0x1p-12f);     // exponent 13 - 15, 1 + 341/1024
  EXPECT_EQ(bits(ref::f16_to_f32(0x7C01)), 0x7FC02000u);
  EXPECT_EQ(ref::f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);                     // a tie, to even
  EXPECT_EQ(ref::f32_to_bf16(1.0f + 0x1.8p-8f), 0x3F81);                   // 3/4 of an ulp: up
  EXPECT_EQ(ref::f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(ref::f32_to_bf16(from_bits(0xFF800001)), 0xFFC0);
}

TEST(Convert, ContractOfTheCall) {
  std::vector<float> x = tt::random_vec(300001, 1), back(x.size());
  std::vector<uint16_t> h(x.size()), b(x.size()), hb(x.size());
  using tessera::DType;
  ASSERT_EQ(tessera::convert(DType::f32, DType::f16, int64_t(x.size()), x.data(), h.data()),
            tessera::Status::ok);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], ref::f32_to_f16(x[i])) << i;
  ASSERT_EQ(tessera::convert(DType::f32, DType::bf16, int64_t(x.size()), x.data(), b.data()),
            tessera::Status::ok);
  ASSERT_EQ(tessera::convert(DType::f16, DType::bf16, int64_t(x.size()), h.data(), hb.data()),
            tessera::Status::ok);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(hb[i], ref::f32_to_bf16(ref::f16_to_f32(h[i]))) << i;
  ASSERT_EQ(tessera::convert(DType::bf16, DType::f32, int64_t(x.size()), b.data(), back.data()),
            tessera::Status::ok);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  // Same type in place is a no-op; any other overlap, a bad type or size is rejected, unwritten.
  EXPECT_EQ(tessera_convert(TESSERA_F16, TESSERA_F16, 10, h.data(), h.data()), TESSERA_OK);
  std::vector<uint16_t> before = h;
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_F16, 100, x.data(),
                            reinterpret_cast<uint16_t*>(x.data()) + 50),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessera_last_error()).rfind("y ", 0), 0u) << tessera_last_error();
  EXPECT_EQ(tessera_convert(static_cast<tessera_dtype>(7), TESSERA_F16, 10, x.data(), h.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessera_last_error()).rfind("from ", 0), 0u) << tessera_last_error();
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_F16, -1, x.data(), h.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_F16, int64_t(1) << 62, x.data(), h.data()),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_EQ(tessera_convert(TESSERA_F32, TESSERA_F16, 0, nullptr, nullptr), TESSERA_OK);
  EXPECT_EQ(h, before);
}

}  // namespace

}  // namespace convert_test
