// 16-bit floats widened in registers for gemm_dot_b16.hpp on AArch64: f16 by FCVTL (base
// ARMv8, exact), bf16 by a widening shift (USHLL). xsimd 8.1 has no 16-bit float type: ACLE
// intrinsics.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

struct Neon64F16Widen {
  using B = xsimd::batch<float, xsimd::neon64>;
  static B load(const uint16_t* p) { return B(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))); }
  static float scalar(uint16_t h) { return convert_detail::f16_to_f32(h); }
};
struct Neon64Bf16Widen {
  using B = xsimd::batch<float, xsimd::neon64>;
  static B load(const uint16_t* p) {
    return B(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)));
  }
  static float scalar(uint16_t h) { return convert_detail::from_bits(uint32_t(h) << 16); }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
