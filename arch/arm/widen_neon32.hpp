// bf16 widened in registers for gemm_dot_b16.hpp on ARMv7 NEON: a widening shift (VSHLL), in
// place of the portable form's round trip through the stack (xsimd 8.1 has no 16-bit float
// type: ACLE intrinsics). f16 keeps the portable scalar form: ARMv7's VCVT flushes subnormals.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

struct Neon32Bf16Widen {
  using B = xsimd::batch<float, xsimd::neon>;
  static B load(const uint16_t* p) {
    return B(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)));
  }
  static float scalar(uint16_t h) { return convert_detail::from_bits(uint32_t(h) << 16); }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
