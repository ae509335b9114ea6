// The integer lanes of the quantized kernels (arch/common/quant.hpp) on NEON, by intrinsics:
// xsimd 8.1 has no widening byte products (smull) or dot products (sdot). Signed by signed
// products, so the sign trick's abs and sign are the identity here. 4 lanes.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Integer sums started at this bias (QuantKernels::gemm_start_bias; the dot kernels): its bits
// are the float 1.5 2^23, so a sum s with |s| < 2^22 (a block's is at most 32 x 127 x 128) reads
// as the float 1.5 2^23 + s, and one exact subtraction on either vector pipe replaces scvtf,
// which takes one pipe for two cycles from the A76 on (llvm-mca's neoverse-n1 and n2).
inline constexpr int32_t kQGemmNeonBias = 0x4B400000;
inline float32x4_t unbias_f32(int32x4_t s) {
  return vsubq_f32(vreinterpretq_f32_s32(s), vdupq_n_f32(12582912.0f));
}

// Columns [c0, c0 + 16) of a block's values as floats (the integers, unscaled). Built for
// dotprod (Cortex-A55, A76 / Neoverse N1 and later), the last widening adds them to the bits of
// 1.5 2^23 (less q4_0's offset 8), which read as a float less 1.5 2^23 are the values, exactly:
// a wide add and a subtraction on either vector pipe where a widening and scvtf take three
// issue slots (scvtf two on one pipe from the A76 on). ARMv8.0 (A53, A72) and ARMv7 keep scvtf.
template <int T>
inline void widen_block16(const uint8_t* qs, int c0, float32x4_t* out) {
#if defined(__ARM_FEATURE_DOTPROD)
  int16x8_t lo, hi;
  if constexpr (T == 0) {
    const int8x16_t b = vld1q_s8(reinterpret_cast<const int8_t*>(qs + c0));
    lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_s8(vget_high_s8(b));
  } else {
    const uint8x16_t u = vld1q_u8(qs);
    const uint8x16_t n = c0 >= 16 ? vshrq_n_u8(u, 4) : vandq_u8(u, vdupq_n_u8(15));
    lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(n)));
    hi = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(n)));
  }
  const int32x4_t bias = vdupq_n_s32(kQGemmNeonBias - (T == 0 ? 0 : 8));
  out[0] = unbias_f32(vaddw_s16(bias, vget_low_s16(lo)));
  out[1] = unbias_f32(vaddw_s16(bias, vget_high_s16(lo)));
  out[2] = unbias_f32(vaddw_s16(bias, vget_low_s16(hi)));
  out[3] = unbias_f32(vaddw_s16(bias, vget_high_s16(hi)));
#else
  int8x16_t b;
  if constexpr (T == 0) {
    b = vld1q_s8(reinterpret_cast<const int8_t*>(qs + c0));
  } else {
    const uint8x16_t u = vld1q_u8(qs);
    b = vsubq_s8(vreinterpretq_s8_u8(c0 >= 16 ? vshrq_n_u8(u, 4) : vandq_u8(u, vdupq_n_u8(15))),
                 vdupq_n_s8(8));
  }
  const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_s8(vget_high_s8(b));
  out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  out[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
  out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  out[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
#endif
}

// ARMv8.0 and ARMv7: vmull.s8 products (int16) added pairwise into int32 lanes (vpadal.s16).
struct QuantNeon {
  using Pv = QuantNeon;
#if defined(__aarch64__)
  static constexpr const char* kDotName = "smull";
#else
  static constexpr const char* kDotName = "vmull.s8";
#endif
  static constexpr int kLanes = 4, kPvCols = 16;
  using F = float32x4_t;
  // A block's f16 scale: AArch64 converts it in one instruction; ARMv7's VCVT flushes f16
  // subnormals, the portable widening there.
  static float scale(const uint8_t* block) {
#if defined(__aarch64__)
    __fp16 h;
    std::memcpy(&h, block, 2);
    return float(h);
#else
    uint16_t h;
    std::memcpy(&h, block, 2);
    return convert_detail::f16_to_f32(h);
#endif
  }
  struct B32 {
    int8x16_t lo, hi;
  };
  template <int T>
  static B32 load_k(const uint8_t* p) {
    if constexpr (T == 0) {
      return {vld1q_s8(reinterpret_cast<const int8_t*>(p)),
              vld1q_s8(reinterpret_cast<const int8_t*>(p + 16))};
    } else {
      const uint8x16_t b = vld1q_u8(p);
      const int8x16_t eight = vdupq_n_s8(8);
      return {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), eight),
              vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight)};
    }
  }
  static B32 load_q(const int8_t* p) { return {vld1q_s8(p), vld1q_s8(p + 16)}; }
  static B32 abs(B32 k) { return k; }
  static B32 sign(B32 q, B32) { return q; }
  static int32x4_t dot(B32 k, B32 q) {
    int32x4_t acc = vpaddlq_s16(vmull_s8(vget_low_s8(k.lo), vget_low_s8(q.lo)));
    acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(k.lo), vget_high_s8(q.lo)));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(k.hi), vget_low_s8(q.hi)));
    return vpadalq_s16(acc, vmull_s8(vget_high_s8(k.hi), vget_high_s8(q.hi)));
  }
  static F cvt(int32x4_t x) { return vcvtq_f32_s32(x); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F zero() { return vdupq_n_f32(0.0f); }
  static float hsum(F v) {
#if defined(__aarch64__)
    return vaddvq_f32(v);
#else
    const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(vpadd_f32(s, s), 0);
#endif
  }
  static F load_f(const float* p) { return vld1q_f32(p); }
  static void store_f(float* p, F v) { vst1q_f32(p, v); }
  // Columns [c0, c0 + 16) of a block's values as floats (the integers, unscaled).
  template <int T, int C>
  static void load_v(const uint8_t* qs, int c0, F* out) {
    static_assert(C == 4, "16 columns a chunk");
    widen_block16<T>(qs, c0, out);
  }
  template <int T>
  static void dequant_block(const uint8_t* qs, float d, float* y) {
    for (int c0 = 0; c0 < 32; c0 += 16) {
      F x[4];
      load_v<T, 4>(qs, c0, x);
      for (int c = 0; c < 4; ++c) vst1q_f32(y + c0 + 4 * c, vmulq_n_f32(x[c], d));
    }
  }
};

#if defined(__ARM_FEATURE_DOTPROD)
// ARMv8.2 dotprod: a block's 32 products in two sdot, four into each int32 lane.
struct QuantNeonDot : QuantNeon {
  // (hides the base's name on purpose: the kernels read QOps::kDotName of the derived set)
  // cppcheck-suppress duplInheritedMember
  static constexpr const char* kDotName = "sdot";
  static int32x4_t dot(B32 k, B32 q) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), k.lo, q.lo), k.hi, q.hi);
  }
};
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
