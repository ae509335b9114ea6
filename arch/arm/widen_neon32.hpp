// 16-bit floats widened in registers for gemm_dot_b16.hpp on ARMv7 NEON (xsimd 8.1 has no 16-bit
// float type: ACLE intrinsics). bf16: a widening shift (VSHLL). f16: integer lane work rather
// than VCVT, which on ARMv7 NEON flushes f16 subnormals to zero: exponent and mantissa shifted
// into place and rebiased; inf and NaN (quietened, as convert.hpp's scalar form and x86's
// VCVTPH2PS do) take the top exponent; a subnormal m 2^-24 is (1 + m/1024) 2^-14 - 2^-14, a
// subtraction of two normal floats that is exact. Bit for bit the scalar form, 4 lanes at once,
// in place of a scalar conversion per element through the stack.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

struct Neon32F16Widen {
  using B = xsimd::batch<float, xsimd::neon>;
  static B load(const uint16_t* p) {
    // Shifts for the sign and the exponent-mantissa bits, and few constants: ARMv7 has 16 q
    // registers, and a kernel's accumulators share them.
    const uint32x4_t w = vmovl_u16(vld1_u16(p));
    const uint32x4_t sign = vshlq_n_u32(vshrq_n_u32(w, 15), 31);
    const uint32x4_t em = vshrq_n_u32(vshlq_n_u32(w, 17), 4);  // (e, m) at float32's place
    const uint32x4_t top = vdupq_n_u32(0x0f800000u);           // e = 31
    const uint32x4_t two_m14 = vdupq_n_u32(113u << 23);        // 2^-14
    const uint32x4_t normal = vaddq_u32(em, vdupq_n_u32(112u << 23));
    const float32x4_t sub =
        vsubq_f32(vreinterpretq_f32_u32(vaddq_u32(em, two_m14)), vreinterpretq_f32_u32(two_m14));
    uint32x4_t r = vbslq_u32(vtstq_u32(em, top), normal, vreinterpretq_u32_f32(sub));
    const uint32x4_t special = vorrq_u32(vaddq_u32(em, vdupq_n_u32(224u << 23)),
                                         vandq_u32(vcgtq_u32(em, top), vdupq_n_u32(0x00400000u)));
    r = vbslq_u32(vcgeq_u32(em, top), special, r);
    return B(vreinterpretq_f32_u32(vorrq_u32(r, sign)));
  }
  static float scalar(uint16_t h) { return convert_detail::f16_to_f32(h); }
};

struct Neon32Bf16Widen {
  using B = xsimd::batch<float, xsimd::neon>;
  static B load(const uint16_t* p) {
    return B(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)));
  }
  static float scalar(uint16_t h) { return convert_detail::from_bits(uint32_t(h) << 16); }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
