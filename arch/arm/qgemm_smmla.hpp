// The integer GEMM tile of block-type weights on FEAT_I8MM (QGemmFn and QGemmPackFn,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no int8 matrix multiply.
//
// Contract:
//  - A panel holds 8 weight rows (C's columns) block by block: the 8 scales as f16 (16 bytes),
//    then groups of 64 bytes, group g holding 8 bytes of each column in turn, so that columns
//    2j and 2j + 1 fill one q register, smmla's right operand: q8_0 4 groups, column c's values
//    8g..8g+7 as stored (signed, no offset); q4_0 2 groups, column c's stored bytes 8g..8g+7,
//    whose low nibbles are values 8g..8g+7 and high nibbles 8g+16..8g+23 (n = q + 8, offset 8).
//    Missing columns are zero. 272 or 144 bytes a block: the sdot tile's panels with runs of 8
//    bytes instead of 4 (QuantKernels::gemm_group).
//  - A's R rows interleaved by words of 8 bytes (QuantKernels::gemm_a_words, QGemmRows), so that
//    a row pair's 8 values of a step are one q register, smmla's left operand.
//  - gemm[t][R], R <= 4: rows in pairs (an odd R pads its last pair with zeros, computed,
//    never stored); per pair, column pair and block the 2 x 2 int32 sums start at start =
//    bias - off sum q (q8_0: bias kQGemmNeonBias, off 0; q4_0: bias 0, off 8), then are
//    converted (q8_0: read as floats less the bias, exact) and scaled by dq dk (one float
//    rounding each) into float32 accumulators, blocks in order; alpha (and beta C) at the store.
//    The same sum for a row whatever R.
//  - Stateless, no allocation; reads the panel's blocks and A's rows only.
//
// smmla d, a, b adds a (2 x 8 int8, a row per half) times b (2 x 8, a column per half)
// transposed into d = [r0 c0, r0 c1, r1 c0, r1 c1]: 32 products, twice sdot's. Per block a row
// pair costs 16 smmla and 4 x 3 float operations, the panel's loads shared by both pairs.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <utility>

#include "../kernels.hpp"
#include "qgemm_sdot.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__ARM_FEATURE_MATMUL_INT8)
inline constexpr int kQGemmSmmlaMr = 4, kQGemmSmmlaGroup = 8;

namespace smmla_tile {

// [x0, x1, x0, x1] from lanes 2h, 2h + 1 of x.
inline float32x4_t pair(float32x4_t x, int h) {
  const float64x2_t d = vreinterpretq_f64_f32(x);
  return vreinterpretq_f32_f64(h == 0 ? vdupq_laneq_f64(d, 0) : vdupq_laneq_f64(d, 1));
}

}  // namespace smmla_tile

template <int T, int R>
void qgemm_smmla(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc, int64_t cols,
                 float alpha, float beta) {
  using namespace smmla_tile;
  constexpr int P = (R + 1) / 2;
  const int64_t blocks = a.blocks;
  float32x4_t acc[P * 4];
  for (int i = 0; i < P * 4; ++i) acc[i] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kQGemmSdotBlockBytes[T];
    int8x16_t az[P * 4];  // pair i's k steps 0..3 at i * 4
    int32x4_t st[P];      // [s0, s0, s1, s1]
    float32x4_t dq[P];    // [d0, d0, d1, d1]
    const int8_t* qs = a.qs + kQBlock * R * b;
    for (int i = 0; i < P; ++i) {
      for (int g = 0; g < 4; ++g)  // an odd R's last pair: 8 bytes, zeros above (ldr d)
        az[i * 4 + g] = 2 * i + 1 < R
                            ? vld1q_s8(qs + 8 * (g * R + 2 * i))
                            : vcombine_s8(vld1_s8(qs + 8 * (g * R + 2 * i)), vdup_n_s8(0));
      if (2 * i + 1 < R) {
        const int32x4_t s = vcombine_s32(vld1_s32(a.start + R * b + 2 * i), vdup_n_s32(0));
        const float32x4_t d = vcombine_f32(vld1_f32(a.d + R * b + 2 * i), vdup_n_f32(0.0f));
        st[i] = vzip1q_s32(s, s), dq[i] = vzip1q_f32(d, d);
      } else {
        st[i] = vld1q_dup_s32(a.start + R * b + 2 * i);
        dq[i] = vld1q_dup_f32(a.d + R * b + 2 * i);
      }
    }
    const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    const float32x4_t dk0 = vcvt_f32_f16(vget_low_f16(h)), dk1 = vcvt_high_f32_f16(h);
    const auto* ps = reinterpret_cast<const int8_t*>(p + 16);
    // Column pair by column pair: only its two sums live beside A's steps and C's accumulators.
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      int32x4_t s[P];
      for (int i = 0; i < P; ++i) s[i] = st[i];
      if constexpr (T == 0) {
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const int8x16_t w = vld1q_s8(ps + 64 * g + 16 * j);
          for (int i = 0; i < P; ++i) s[i] = vmmlaq_s32(s[i], az[i * 4 + g], w);
        }
      } else {
#pragma GCC unroll 2
        for (int g = 0; g < 2; ++g) {
          const uint8x16_t raw = vld1q_u8(p + 16 + 64 * g + 16 * j);
          const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(15)));
          const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
          for (int i = 0; i < P; ++i) {
            s[i] = vmmlaq_s32(s[i], az[i * 4 + g], lo);
            s[i] = vmmlaq_s32(s[i], az[i * 4 + g + 2], hi);
          }
        }
      }
      const float32x4_t dk = pair(j < 2 ? dk0 : dk1, j % 2);
      for (int i = 0; i < P; ++i) {
        const float32x4_t f = T == 0 ? unbias_f32(s[i]) : vcvtq_f32_s32(s[i]);
        acc[i * 4 + j] = vfmaq_f32(acc[i * 4 + j], f, vmulq_f32(dk, dq[i]));
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float out[kQGemmSdotNr];
    const int i = r / 2, hi = r % 2;
    for (int j = 0; j < 4; ++j) {
      const float32x4_t v = vmulq_n_f32(acc[i * 4 + j], alpha);
      vst1_f32(out + 2 * j, hi ? vget_high_f32(v) : vget_low_f32(v));
    }
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < cols && j < kQGemmSdotNr; ++j)
      cr[j] = beta != 0.0f ? out[j] + beta * cr[j] : out[j];
  }
}

template <int... R>
void fill_qgemm_smmla(QuantKernels& k, std::integer_sequence<int, R...>) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.gemm_mr = kQGemmSmmlaMr, k.gemm_nr = kQGemmSdotNr;
  for (int t = 0; t < 2; ++t) k.gemm_block_bytes[t] = kQGemmSdotBlockBytes[t];
  k.gemm_offset[0] = 0, k.gemm_offset[1] = 8;  // signed q8_0 as stored; n = q + 8
  k.gemm_group = kQGemmSmmlaGroup, k.gemm_a_words = true;
  k.gemm_start_bias[0] = kQGemmNeonBias;
  k.gemm_name = "smmla";
  ((k.gemm[0][R + 1] = &qgemm_smmla<0, R + 1>), ...);
  ((k.gemm[1][R + 1] = &qgemm_smmla<1, R + 1>), ...);
  k.gemm_pack[0] = &qgemm_pack_sdot<0, kQGemmSmmlaGroup>;
  k.gemm_pack[1] = &qgemm_pack_sdot<1, kQGemmSmmlaGroup>;
#else
  (void)k;
#endif
}
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
