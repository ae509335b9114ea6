// Conversions between float32 and the 16-bit storage types, written once; an ISA passes the
// lanes that convert f16 in hardware (F16C, AVX-512, AArch64 FCVTL/FCVTN) as ConvertLanes.
//
// Contract (the reference in src/reference/convert.cpp is the spec, bit for bit):
//  - f32 -> f16 and f32 -> bf16 round to nearest, ties to even; +-inf stay infinite; a NaN
//    stays a NaN of the same sign, quieted, keeping the top bits of its payload; f16 overflow
//    (|x| >= 65520) gives inf; f16 subnormals are kept, not flushed.
//  - f16 -> f32 and bf16 -> f32 are exact (an f16 NaN is quieted, its payload kept).
//  - n >= 0 elements; x and y do not overlap; any alignment.
#pragma once

#include "kernel_ns.hpp"

#include <cstdint>
#include <cstring>

#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace convert_detail {

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The rounding done on the bits: the f32 exponent rebiased to f16's, the mantissa rounded
// at bit 13 (to even); subnormal results by adding 0.5f, whose ulp is f16's smallest step 2^-24.
inline uint16_t f32_to_f16(float x) {
  const uint32_t b = bits(x), sign = (b >> 16) & 0x8000u, a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // 65520 and up (and inf): inf
  if (a >= 0x38800000u) {                                 // 2^-14 and up: normal
    const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
    return uint16_t(sign | ((r - 0x38000000u) >> 13));
  }
  return uint16_t(sign | (bits(from_bits(a) + 0.5f) - 0x3F000000u));
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return from_bits(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) return from_bits(sign | bits(float(m) * 0x1p-24f));
  return from_bits(sign | ((e + 112) << 23) | (m << 13));
}

inline uint16_t f32_to_bf16(float x) {
  const uint32_t b = bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((b >> 16) | 0x40u);  // NaN, quieted
  return uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

// No hardware f16 lanes: every element through the scalar forms.
struct ScalarLanes {
  static constexpr int64_t kWidth = 0;
};

}  // namespace convert_detail

// Lanes: ScalarLanes, or a type with kWidth and to_f16 / from_f16 converting kWidth elements.
template <class Lanes>
void convert_f32_to_f16(int64_t n, const float* x, uint16_t* y) {
  int64_t i = 0;
  if constexpr (Lanes::kWidth > 0)
    for (; i + Lanes::kWidth <= n; i += Lanes::kWidth) Lanes::to_f16(x + i, y + i);
  for (; i < n; ++i) y[i] = convert_detail::f32_to_f16(x[i]);
}

template <class Lanes>
void convert_f16_to_f32(int64_t n, const uint16_t* x, float* y) {
  int64_t i = 0;
  if constexpr (Lanes::kWidth > 0)
    for (; i + Lanes::kWidth <= n; i += Lanes::kWidth) Lanes::from_f16(x + i, y + i);
  for (; i < n; ++i) y[i] = convert_detail::f16_to_f32(x[i]);
}

// bf16 is f32's top half: integer work the compiler vectorises for each table's ISA.
template <class Lanes>
void convert_f32_to_bf16(int64_t n, const float* x, uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = convert_detail::f32_to_bf16(x[i]);
}

template <class Lanes>
void convert_bf16_to_f32(int64_t n, const uint16_t* x, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = uint32_t(x[i]) << 16;
    std::memcpy(y + i, &b, 4);
  }
}

template <class Lanes = convert_detail::ScalarLanes>
ConvertKernels make_convert_kernels() {
  ConvertKernels c{};
  c.f32_to_f16 = &convert_f32_to_f16<Lanes>;
  c.f16_to_f32 = &convert_f16_to_f32<Lanes>;
  c.f32_to_bf16 = &convert_f32_to_bf16<Lanes>;
  c.bf16_to_f32 = &convert_bf16_to_f32<Lanes>;
  return c;
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
