// f16 lanes for arch/common/convert.hpp on AArch64: FCVTN / FCVTL (base ARMv8, rounding and
// NaNs as FPCR sets them: to nearest even, NaNs propagated). xsimd 8.1 has no half type, so
// these are the ACLE intrinsics. (ARMv7's NEON VCVT flushes subnormals and replaces NaNs by
// the default NaN, so neon32 keeps the scalar forms.)
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

#include <cstdint>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

struct Neon64HalfLanes {
  static constexpr int64_t kWidth = 8;
  static void to_f16(const float* x, uint16_t* y) {
    const float16x4_t lo = vcvt_f16_f32(vld1q_f32(x)), hi = vcvt_f16_f32(vld1q_f32(x + 4));
    vst1q_u16(y, vreinterpretq_u16_f16(vcombine_f16(lo, hi)));
  }
  static void from_f16(const uint16_t* x, float* y) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x));
    vst1q_f32(y, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(y + 4, vcvt_high_f32_f16(h));
  }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
