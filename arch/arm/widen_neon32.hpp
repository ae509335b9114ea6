// 16-bit floats widened in registers for gemm_dot_b16.hpp on ARMv7 NEON (xsimd 8.1 has no 16-bit
// float type: ACLE intrinsics and one VCVT in assembly, which needs no __fp16 format flag).
// bf16: a widening shift (VSHLL). f16: VCVT.F32.F16, which on ARMv7 NEON flushes f16
// subnormals to zero, with the subnormal lanes put back from integer lane work: the scalar
// form's value for every f16 (NaNs as VCVT gives them), 4 lanes at once, in place of a scalar
// conversion per element through the stack.
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
    const uint16x4_t h = vld1_u16(p);
    uint32x4_t f;  // VCVT: exact but for subnormals, which come out as zeros of their sign
    asm("vcvt.f32.f16 %q0, %P1" : "=w"(f) : "w"(h));
    // Subnormals (e = 0): m 2^-24 by a fixed-point conversion with 24 fraction bits (exact,
    // m < 2^10), OR'd into the signed zero; shifts and a compare with zero, no constant: ARMv7
    // has 16 q registers, which the streaming kernels' broadcasts and sums share.
    const uint32x4_t w = vmovl_u16(h);
    const uint32x4_t m = vshrq_n_u32(vshlq_n_u32(w, 22), 22);
    const uint32x4_t e0 = vceqq_u32(vshrq_n_u32(vshlq_n_u32(w, 17), 27), vdupq_n_u32(0));
    const uint32x4_t sub = vreinterpretq_u32_f32(vcvtq_n_f32_u32(m, 24));
    return B(vreinterpretq_f32_u32(vorrq_u32(f, vandq_u32(sub, e0))));
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
