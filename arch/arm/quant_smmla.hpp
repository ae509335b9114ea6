// The integer dot kernel on FEAT_I8MM (QuantDotFn's contract, arch/kernels.hpp), by intrinsics:
// xsimd 8.1 has no int8 matrix multiply.
//
// smmla d, a, b adds a (2 x 8 int8, a row per half) times b (2 x 8, a key per half) transposed
// into d = [r0 k0, r0 k1, r1 k0, r1 k1] (int32): 32 products an instruction, twice sdot's. A
// pair of query rows is interleaved once per call, 8 bytes of each row a group (qp[p][b][g]); a
// pair of keys is interleaved per block by 64-bit zips (4 per pair, shared by every row pair).
// A block is then 4 smmla per row pair and key pair, its 2 x 2 exact sums started at the bias
// of quant_neon.hpp (less 8 sum q for q4_0, whose nibbles go in unsigned), read as floats by
// one subtraction and scaled by [dq0 dk0, dq0 dk1, dq1 dk0, dq1 dk1]. Four keys a step (two pairs);
// an odd row count pads its last pair with a zero row (computed, never stored); a step's missing
// keys repeat its last key (read in bounds, never stored).
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../kernels.hpp"
#include "quant_neon.hpp"
#include "quant_neon4.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__ARM_FEATURE_MATMUL_INT8)
namespace smmla {

inline int8x16_t zip1(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip2(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// One row pair's block sums against a key pair whose groups are g[0..3], from start.
inline int32x4_t block(int32x4_t start, const int8x16_t* qp, const int8x16_t* g) {
  int32x4_t t = vmmlaq_s32(start, qp[0], g[0]);
  t = vmmlaq_s32(t, qp[1], g[1]);
  t = vmmlaq_s32(t, qp[2], g[2]);
  return vmmlaq_s32(t, qp[3], g[3]);
}

}  // namespace smmla

template <int T, int R>
void quant_dot_smmla(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                     int64_t lds, float alpha) {
  static_assert(R >= 1 && R <= 4, "one or two row pairs");
  constexpr int P = (R + 1) / 2;
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int64_t kMaxBlocks = 16;  // 512 values of the query a pass
  for (int64_t b0 = 0; b0 < q.blocks; b0 += kMaxBlocks) {
    const int64_t nb = std::min(kMaxBlocks, q.blocks - b0);
    int8x16_t qp[P][kMaxBlocks][4];
    float32x4_t dq[P][kMaxBlocks];  // [d0, d0, d1, d1] of the pair's rows
    int32x4_t st[P][kMaxBlocks];    // [s0, s0, s1, s1]: the bias less q4_0's offset share
    for (int p = 0; p < P; ++p)
      for (int64_t b = 0; b < nb; ++b) {
        const int r0 = 2 * p, r1 = 2 * p + 1;
        const int8_t* q0 = q.qs + r0 * q.ld + (b0 + b) * kQBlock;
        const int8_t* q1 = q.qs + r1 * q.ld + (b0 + b) * kQBlock;
        for (int g = 0; g < 4; ++g)
          qp[p][b][g] =
              vcombine_s8(vld1_s8(q0 + 8 * g), r1 < R ? vld1_s8(q1 + 8 * g) : vdup_n_s8(0));
        const float d0 = q.d[r0 * q.blocks + b0 + b];
        const float d1 = r1 < R ? q.d[r1 * q.blocks + b0 + b] : 0.0f;
        dq[p][b] = vcombine_f32(vdup_n_f32(d0), vdup_n_f32(d1));
        const int32_t s0 = T == 0 ? 0 : row_block_sum(q, r0, b0 + b);
        const int32_t s1 = T == 0 || r1 >= R ? 0 : row_block_sum(q, r1, b0 + b);
        st[p][b] =
            vcombine_s32(vdup_n_s32(kQGemmNeonBias - 8 * s0), vdup_n_s32(kQGemmNeonBias - 8 * s1));
      }
    for (int64_t j = 0; j < n; j += 4) {
      const int64_t nk = std::min<int64_t>(4, n - j);
      const uint8_t* kp[4];
      for (int64_t c = 0; c < 4; ++c) kp[c] = k + (j + std::min(c, nk - 1)) * ldk + b0 * BS;
      float32x4_t acc[P][2];
      for (int p = 0; p < P; ++p) acc[p][0] = acc[p][1] = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = b * BS;
        const auto k0 = neon4::load_k_unsigned<T>(kp[0] + at + 2);
        const auto k1 = neon4::load_k_unsigned<T>(kp[1] + at + 2);
        const auto k2 = neon4::load_k_unsigned<T>(kp[2] + at + 2);
        const auto k3 = neon4::load_k_unsigned<T>(kp[3] + at + 2);
        const int8x16_t g01[4] = {smmla::zip1(k0.lo, k1.lo), smmla::zip2(k0.lo, k1.lo),
                                  smmla::zip1(k0.hi, k1.hi), smmla::zip2(k0.hi, k1.hi)};
        const int8x16_t g23[4] = {smmla::zip1(k2.lo, k3.lo), smmla::zip2(k2.lo, k3.lo),
                                  smmla::zip1(k2.hi, k3.hi), smmla::zip2(k2.hi, k3.hi)};
        const float32x4_t dk = neon4::scales(kp[0] + at, kp[1] + at, kp[2] + at, kp[3] + at);
        const float32x4_t dk01 = vcombine_f32(vget_low_f32(dk), vget_low_f32(dk));
        const float32x4_t dk23 = vcombine_f32(vget_high_f32(dk), vget_high_f32(dk));
        for (int p = 0; p < P; ++p) {
          const int32x4_t t01 = smmla::block(st[p][b], qp[p][b], g01);
          const int32x4_t t23 = smmla::block(st[p][b], qp[p][b], g23);
          acc[p][0] = vfmaq_f32(acc[p][0], unbias_f32(t01), vmulq_f32(dq[p][b], dk01));
          acc[p][1] = vfmaq_f32(acc[p][1], unbias_f32(t23), vmulq_f32(dq[p][b], dk23));
        }
      }
      // [r0 k0, r0 k1, r1 k0, r1 k1] and the same for k2, k3 -> each row's four keys.
      for (int r = 0; r < R; ++r) {
        const int p = r / 2;
        const float32x4_t row =
            r % 2 == 0 ? vcombine_f32(vget_low_f32(acc[p][0]), vget_low_f32(acc[p][1]))
                       : vcombine_f32(vget_high_f32(acc[p][0]), vget_high_f32(acc[p][1]));
        float out[4];
        vst1q_f32(out, vmulq_n_f32(row, alpha));
        float* dst = s + r * lds + j;
        for (int64_t c = 0; c < nk; ++c) dst[c] = b0 == 0 ? out[c] : dst[c] + out[c];
      }
    }
  }
}
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
