// The conversions' specification, from the formats' definitions: the value's binary exponent
// and significand, rounded in double with nearbyint (the default mode rounds to nearest even).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/reference.hpp"

namespace tessera::reference {
namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// 2^(e - 25) for each exponent field e of a half, exact: a half is (1024 + m) 2^(e - 25), or
// m 2^-24 when e = 0. (A table, not ldexp: the conversion runs once per element the references
// and testers read, and ldexp was most of their time under qemu.)
struct HalfScales {
  double v[32];
  constexpr HalfScales() : v() {
    double p = 0x1p-25;
    for (double& x : v) x = p, p *= 2.0;
  }
};
constexpr HalfScales kHalfScale;

}  // namespace

uint16_t f32_to_f16(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = uint16_t((b >> 31) << 15);
  // NaN: quiet bit set, the top 9 of the other 22 payload bits kept.
  if (std::isnan(x)) return uint16_t(sign | 0x7C00u | 0x200u | ((b >> 13) & 0x1FFu));
  const double a = std::fabs(double(x));
  // Halfway between the largest half (65504) and 2^16 rounds to the even one: 2^16, infinite.
  if (a >= 65520.0) return uint16_t(sign | 0x7C00u);
  if (a < 0x1p-14) {  // subnormal (or zero): a multiple of 2^-24; 2^-14 itself encodes as 0x400
    return uint16_t(sign | uint16_t(std::nearbyint(a * 0x1p24)));
  }
  int e;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1): the half's exponent is e - 1
  double m = std::nearbyint((std::ldexp(a, 1 - e) - 1.0) * 1024.0);
  if (m == 1024.0) m = 0, ++e;  // rounded up to the next power of two
  return uint16_t(sign | uint16_t((e - 1 + 15) << 10) | uint16_t(m));
}

float f16_to_f32(uint16_t h) {
  const bool negative = h & 0x8000u;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0x1F) {
    if (m == 0) return negative ? -INFINITY : INFINITY;
    return float_of((negative ? 0x80000000u : 0u) | 0x7FC00000u | (uint32_t(m) << 13));
  }
  const double v = e == 0 ? double(m) * kHalfScale.v[1] : (1024.0 + m) * kHalfScale.v[e];
  return float(negative ? -v : v);
}

uint16_t f32_to_bf16(float x) {
  const uint32_t b = bits_of(x);
  if (std::isnan(x)) return uint16_t((b >> 16) | 0x40u);
  // The top 16 bits, rounded at the 16 dropped: up when they are over half, or exactly half and
  // the kept part is odd. A carry out of the significand moves the exponent (to inf past the
  // largest finite value), as the format's order requires.
  const uint32_t kept = b >> 16, dropped = b & 0xFFFFu;
  const bool up = dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u));
  return uint16_t(kept + (up ? 1u : 0u));
}

float bf16_to_f32(uint16_t h) { return float_of(uint32_t(h) << 16); }

void store_element(tessera_dtype t, void* p, int64_t i, float x) {
  if (t == TESSERA_F32)
    static_cast<float*>(p)[i] = x;
  else
    static_cast<uint16_t*>(p)[i] = t == TESSERA_F16 ? f32_to_f16(x) : f32_to_bf16(x);
}

}  // namespace tessera::reference
