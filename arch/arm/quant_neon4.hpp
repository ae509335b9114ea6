// The integer dot kernel of the AArch64 tables, four keys a step (QuantDotFn's contract,
// arch/kernels.hpp), over QuantNeon's or QuantNeonDot's block products (quant_neon.hpp).
//
// A block's int32 lanes must be summed and scaled by dq dk before they meet another block's. The
// generic kernel (common/quant.hpp) scales each key's lanes and sums them horizontally per key;
// here four keys' lanes are first folded into one vector by pairwise adds (exact, int32), so a
// row's conversion and two float operations serve four keys, and the key scales of a block are
// one vector. A step's missing keys repeat its last key (read in bounds, never stored).
// ARMv7 keeps the generic kernel: 16 q registers cannot hold four keys' blocks and the sums.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"
#include "quant_neon.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__aarch64__)
namespace neon4 {

// The f16 scales at the front of four blocks, widened: one vector.
inline float32x4_t scales(const uint8_t* b0, const uint8_t* b1, const uint8_t* b2,
                          const uint8_t* b3) {
  uint16_t h[4];
  std::memcpy(&h[0], b0, 2), std::memcpy(&h[1], b1, 2);
  std::memcpy(&h[2], b2, 2), std::memcpy(&h[3], b3, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// A key's block as the offset-free kernels read it: q8_0 as stored; q4_0's nibbles n = q + 8
// unsigned (the offset's share, 8 sum q, comes off the start instead of 8 off every value).
template <int T>
inline QuantNeon::B32 load_k_unsigned(const uint8_t* p) {
  if constexpr (T == 0) return QuantNeon::load_k<0>(p);
  const uint8x16_t b = vld1q_u8(p);
  return {vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), vreinterpretq_s8_u8(vshrq_n_u8(b, 4))};
}

// [sum a0, sum a1, sum a2, sum a3]
inline int32x4_t sum4(int32x4_t a0, int32x4_t a1, int32x4_t a2, int32x4_t a3) {
  return vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
}

}  // namespace neon4

template <class QOps, int T, int R>
void quant_dot_neon4(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                     int64_t lds, float alpha) {
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks;
  for (int64_t j = 0; j < n; j += 4) {
    const int64_t nk = std::min<int64_t>(4, n - j);
    const uint8_t* kp[4];
    for (int64_t c = 0; c < 4; ++c) kp[c] = k + (j + std::min(c, nk - 1)) * ldk;
    float32x4_t acc[R];
    for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t at = b * BS;
      const auto k0 = QOps::template load_k<T>(kp[0] + at + 2);
      const auto k1 = QOps::template load_k<T>(kp[1] + at + 2);
      const auto k2 = QOps::template load_k<T>(kp[2] + at + 2);
      const auto k3 = QOps::template load_k<T>(kp[3] + at + 2);
      const float32x4_t dk = neon4::scales(kp[0] + at, kp[1] + at, kp[2] + at, kp[3] + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto qv = QOps::load_q(q.qs + r * q.ld + b * kQBlock);
        const int32x4_t t =
            neon4::sum4(QOps::dot(k0, qv), QOps::dot(k1, qv), QOps::dot(k2, qv), QOps::dot(k3, qv));
        acc[r] = vfmaq_n_f32(acc[r], vmulq_f32(vcvtq_f32_s32(t), dk), q.d[r * blocks + b]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const float32x4_t out = vmulq_n_f32(acc[r], alpha);
      if (nk == 4) {
        vst1q_f32(s + r * lds + j, out);
      } else {
        float lanes[4];
        vst1q_f32(lanes, out);
        std::memcpy(s + r * lds + j, lanes, size_t(nk) * sizeof(float));
      }
    }
  }
}

#if defined(__ARM_FEATURE_DOTPROD)
// sdot by element with the rows in lanes (3 or 4 rows): the query rows are transposed once per
// call into qt[b][g] = the 4 bytes of group g (of 8) of block b from each row, one row a lane,
// and `sdot t, qt[b][g], key.4b[g]` adds each row's products with group g of the key: a key's
// block is 8 sdot into one vector holding every row's exact block sum, with no pairwise adds,
// then one conversion and two float operations for all rows. Four keys' row vectors are
// transposed to key vectors for the stores.
template <int T, int R>
void quant_dot_sdot_rows(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                         int64_t lds, float alpha) {
  static_assert(R == 3 || R == 4, "rows in the lanes of one vector");
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int64_t kMaxBlocks = 16;  // 512 values of the query a pass
  for (int64_t b0 = 0; b0 < q.blocks; b0 += kMaxBlocks) {
    const int64_t nb = std::min(kMaxBlocks, q.blocks - b0);
    int8x16_t qt[kMaxBlocks][8];
    float32x4_t dq[kMaxBlocks];
    int32x4_t st[kMaxBlocks];  // each row's start: the bias less q4_0's offset share 8 sum q
    for (int64_t b = 0; b < nb; ++b) {
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int32_t s0[4] = {kQGemmNeonBias, kQGemmNeonBias, kQGemmNeonBias, kQGemmNeonBias};
      for (int r = 0; r < R; ++r) {
        d[r] = q.d[r * q.blocks + b0 + b];
        if constexpr (T == 1) s0[r] -= 8 * row_block_sum(q, r, b0 + b);
      }
      dq[b] = vld1q_f32(d), st[b] = vld1q_s32(s0);
      for (int g = 0; g < 8; ++g) {
        int32_t lanes[4] = {0, 0, 0, 0};
        for (int r = 0; r < R; ++r)
          std::memcpy(&lanes[r], q.qs + r * q.ld + (b0 + b) * kQBlock + 4 * g, 4);
        qt[b][g] = vreinterpretq_s8_s32(vld1q_s32(lanes));
      }
    }
    // One key's block b: every row's exact block sum, then scaled into acc.
    const auto block = [&](const uint8_t* kp, int64_t b, float32x4_t acc) {
      const auto kv = neon4::load_k_unsigned<T>(kp + b * BS + 2);
      int32x4_t t = st[b];
      t = vdotq_laneq_s32(t, qt[b][0], kv.lo, 0), t = vdotq_laneq_s32(t, qt[b][1], kv.lo, 1);
      t = vdotq_laneq_s32(t, qt[b][2], kv.lo, 2), t = vdotq_laneq_s32(t, qt[b][3], kv.lo, 3);
      t = vdotq_laneq_s32(t, qt[b][4], kv.hi, 0), t = vdotq_laneq_s32(t, qt[b][5], kv.hi, 1);
      t = vdotq_laneq_s32(t, qt[b][6], kv.hi, 2), t = vdotq_laneq_s32(t, qt[b][7], kv.hi, 3);
      return vfmaq_f32(acc, unbias_f32(t), vmulq_n_f32(dq[b], QuantNeon::scale(kp + b * BS)));
    };
    for (int64_t j = 0; j < n; j += 4) {
      const int64_t nk = std::min<int64_t>(4, n - j);
      float32x4_t rows[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                             vdupq_n_f32(0.0f)};
      const uint8_t* kp = k + j * ldk + b0 * BS;
      if (nk == 4) {  // four independent sdot chains a block
        for (int64_t b = 0; b < nb; ++b) {
          rows[0] = block(kp, b, rows[0]), rows[1] = block(kp + ldk, b, rows[1]);
          rows[2] = block(kp + 2 * ldk, b, rows[2]), rows[3] = block(kp + 3 * ldk, b, rows[3]);
        }
      } else {
        for (int64_t c = 0; c < nk; ++c)
          for (int64_t b = 0; b < nb; ++b) rows[c] = block(kp + c * ldk, b, rows[c]);
      }
      // [key][row] -> [row][key]
      const float32x4_t t0 = vtrn1q_f32(rows[0], rows[1]), t1 = vtrn2q_f32(rows[0], rows[1]);
      const float32x4_t t2 = vtrn1q_f32(rows[2], rows[3]), t3 = vtrn2q_f32(rows[2], rows[3]);
      const float32x4_t by_row[4] = {
          vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))),
          vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3))),
          vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))),
          vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)))};
      for (int r = 0; r < R; ++r) {
        float out[4];
        vst1q_f32(out, vmulq_n_f32(by_row[r], alpha));
        float* dst = s + r * lds + j;
        for (int64_t c = 0; c < nk; ++c) dst[c] = b0 == 0 ? out[c] : dst[c] + out[c];
      }
    }
  }
}
#endif

// The AArch64 tables' dot kernels replaced by the four-key ones.
template <class QOps>
void use_neon4_dots(QuantKernels& k) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.dot[0][1] = &quant_dot_neon4<QOps, 0, 1>, k.dot[0][2] = &quant_dot_neon4<QOps, 0, 2>;
  k.dot[0][3] = &quant_dot_neon4<QOps, 0, 3>, k.dot[0][4] = &quant_dot_neon4<QOps, 0, 4>;
  k.dot[1][1] = &quant_dot_neon4<QOps, 1, 1>, k.dot[1][2] = &quant_dot_neon4<QOps, 1, 2>;
  k.dot[1][3] = &quant_dot_neon4<QOps, 1, 3>, k.dot[1][4] = &quant_dot_neon4<QOps, 1, 4>;
  static_assert(kMaxDotRows == 4, "a kernel per row count");
#if defined(__ARM_FEATURE_DOTPROD)
  if constexpr (std::is_same_v<QOps, QuantNeonDot>) {  // 3 and 4 rows: the rows in lanes
    k.dot[0][3] = &quant_dot_sdot_rows<0, 3>, k.dot[0][4] = &quant_dot_sdot_rows<0, 4>;
    k.dot[1][3] = &quant_dot_sdot_rows<1, 3>, k.dot[1][4] = &quant_dot_sdot_rows<1, 4>;
  }
#endif
#else
  (void)k;
#endif
}
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
