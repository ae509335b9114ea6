// The integer GEMM tile of block-type weights on ARMv8.2 dotprod (QGemmFn and QGemmPackFn,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no sdot.
//
// Contract:
//  - A panel holds 8 weight rows (C's columns, one per int32 lane of two q registers) block by
//    block: the 8 scales as f16 (16 bytes), then the block's values in sdot's order: q8_0 8
//    groups of 32 bytes, group g lane c holding values 4g..4g+3 of column c as stored (signed:
//    sdot multiplies signed by signed, so q8_0 needs no offset); q4_0 4 groups whose low
//    nibbles are values 4g..4g+3 (n = q + 8, offset 8) and high nibbles 4g+16..4g+19: each
//    column's stored bytes 4g..4g+3. Missing columns are zero. 272 or 144 bytes a block.
//  - gemm[t][R], R <= 3: per row and block, the int32 lanes start at start = bias - off sum q
//    (q8_0: bias kQGemmNeonBias, off 0; q4_0: bias 0, off 8) and sdot by element adds A's 4
//    bytes of group g (lane g % 4 of the row's block half g / 4) times the group's weights; then
//    converted (q8_0: read as floats less the bias, exact) and scaled by dq dk (one float
//    rounding each) into float32 accumulators, blocks in order; alpha (and beta C) at the store.
//    The same sum for a row whatever R. (q4_0's tile keeps scvtf: the bias's register spills
//    its accumulators at R = 3.)
//  - Stateless, no allocation; reads the panel's blocks and A's rows only.
//
// Per block a row costs 16 sdot (2 column vectors x 8 groups), 2 conversions, 2 multiplies and
// 2 FMAs; the panel's loads (and q4_0's nibble split) are shared by the R rows.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "../kernels.hpp"
#include "quant_neon.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int kQGemmSdotNr = 8;
inline constexpr int kQGemmSdotMr = 3;
inline constexpr int64_t kQGemmSdotBlockBytes[2] = {16 + 256, 16 + 128};

// G = 4 (sdot's groups); the smmla tile's panels are the same with runs of G = 8 bytes
// (qgemm_smmla.hpp): group g holds each column's stored bytes G g..G g + G - 1 in turn.
template <int T, int G = 4>
void qgemm_pack_sdot(int64_t cols, int64_t blocks, const uint8_t* b, int64_t ldb, uint8_t* panel) {
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int kGroups = (T == 0 ? 32 : 16) / G;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint8_t* out = panel + blk * kQGemmSdotBlockBytes[T];
    std::memset(out, 0, size_t(kQGemmSdotBlockBytes[T]));
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t* src = b + c * ldb + blk * BS;
      std::memcpy(out + 2 * c, src, 2);
      for (int g = 0; g < kGroups; ++g)
        std::memcpy(out + 16 + G * kQGemmSdotNr * g + G * c, src + 2 + G * g, G);
    }
  }
}

namespace sdot_tile {

// A row group's state as one-dimensional arrays (GCC 12 kept two-dimensional arrays of vectors
// on the stack, a store and a load of every accumulator a block): A's block halves, the two
// column vectors' int32 sums.
template <int R>
struct Sums {
  int8x16_t a0[R], a1[R];
  int32x4_t s0[R], s1[R];
};

// Group G of a block: both column vectors' sdot for every row (lane G % 4 of A's half G / 4).
template <int G, int R>
inline void q8_group(const int8_t* p, Sums<R>& x) {
  const int8x16_t w0 = vld1q_s8(p + 16 + 32 * G), w1 = vld1q_s8(p + 32 + 32 * G);
  for (int r = 0; r < R; ++r) {
    const int8x16_t a = G < 4 ? x.a0[r] : x.a1[r];
    x.s0[r] = vdotq_laneq_s32(x.s0[r], w0, a, G % 4);
    x.s1[r] = vdotq_laneq_s32(x.s1[r], w1, a, G % 4);
  }
}

template <int G, int R>
inline void q4_group(const uint8_t* p, Sums<R>& x) {
  const uint8x16_t r0 = vld1q_u8(p + 16 + 32 * G), r1 = vld1q_u8(p + 32 + 32 * G);
  const uint8x16_t m = vdupq_n_u8(15);
  const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(r0, m));
  const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(r0, 4));
  const int8x16_t lo1 = vreinterpretq_s8_u8(vandq_u8(r1, m));
  const int8x16_t hi1 = vreinterpretq_s8_u8(vshrq_n_u8(r1, 4));
  for (int r = 0; r < R; ++r) {
    x.s0[r] = vdotq_laneq_s32(x.s0[r], lo0, x.a0[r], G);
    x.s1[r] = vdotq_laneq_s32(x.s1[r], lo1, x.a0[r], G);
    x.s0[r] = vdotq_laneq_s32(x.s0[r], hi0, x.a1[r], G);
    x.s1[r] = vdotq_laneq_s32(x.s1[r], hi1, x.a1[r], G);
  }
}

}  // namespace sdot_tile

template <int T, int R>
void qgemm_sdot(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc, int64_t cols,
                float alpha, float beta) {
  using namespace sdot_tile;
  const int64_t blocks = a.blocks;
  float32x4_t acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kQGemmSdotBlockBytes[T];
    const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    const float32x4_t dk0 = vcvt_f32_f16(vget_low_f16(h)), dk1 = vcvt_high_f32_f16(h);
    Sums<R> x;
    for (int r = 0; r < R; ++r) {
      const int8_t* q = a.qs + r * a.ld + b * kQBlock;
      x.a0[r] = vld1q_s8(q), x.a1[r] = vld1q_s8(q + 16);
      x.s0[r] = x.s1[r] = vdupq_n_s32(a.start[r * blocks + b]);
    }
    const auto* ps = reinterpret_cast<const int8_t*>(p);
    if constexpr (T == 0) {
      q8_group<0>(ps, x), q8_group<1>(ps, x), q8_group<2>(ps, x), q8_group<3>(ps, x);
      q8_group<4>(ps, x), q8_group<5>(ps, x), q8_group<6>(ps, x), q8_group<7>(ps, x);
    } else {
      q4_group<0>(p, x), q4_group<1>(p, x), q4_group<2>(p, x), q4_group<3>(p, x);
    }
    for (int r = 0; r < R; ++r) {
      const float32x4_t dq = vdupq_n_f32(a.d[r * blocks + b]);
      const float32x4_t f0 = T == 0 ? unbias_f32(x.s0[r]) : vcvtq_f32_s32(x.s0[r]);
      const float32x4_t f1 = T == 0 ? unbias_f32(x.s1[r]) : vcvtq_f32_s32(x.s1[r]);
      acc0[r] = vfmaq_f32(acc0[r], f0, vmulq_f32(dk0, dq));
      acc1[r] = vfmaq_f32(acc1[r], f1, vmulq_f32(dk1, dq));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float out[kQGemmSdotNr];
    vst1q_f32(out, vmulq_n_f32(acc0[r], alpha));
    vst1q_f32(out + 4, vmulq_n_f32(acc1[r], alpha));
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < cols && j < kQGemmSdotNr; ++j)
      cr[j] = beta != 0.0f ? out[j] + beta * cr[j] : out[j];
  }
}

template <int... R>
void fill_qgemm_sdot(QuantKernels& k, std::integer_sequence<int, R...>) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.gemm_mr = kQGemmSdotMr, k.gemm_nr = kQGemmSdotNr;
  for (int t = 0; t < 2; ++t) k.gemm_block_bytes[t] = kQGemmSdotBlockBytes[t];
  k.gemm_offset[0] = 0, k.gemm_offset[1] = 8;  // signed q8_0 as stored; n = q + 8
  k.gemm_start_bias[0] = kQGemmNeonBias;
  k.gemm_name = "sdot";
  ((k.gemm[0][R + 1] = &qgemm_sdot<0, R + 1>), ...);
  ((k.gemm[1][R + 1] = &qgemm_sdot<1, R + 1>), ...);
  k.gemm_pack[0] = &qgemm_pack_sdot<0>;
  k.gemm_pack[1] = &qgemm_pack_sdot<1>;
#else
  (void)k;
#endif
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
