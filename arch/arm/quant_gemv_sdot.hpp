// The GEMV kernels of the dotprod tables (neon64_v82 and its i8mm build) for block-type weights as
// stored (QuantDotFn's contract, arch/kernels.hpp; QuantKernels::gemv), by intrinsics: xsimd 8.1
// has no sdot.
//
// As the x86 ones (quant_gemv_vnni512.hpp): one key (weight row) at a time through all its
// blocks, a single sequential stream, the query rows' blocks from L1. A block is two sdot (its
// two 16-byte halves, signed by signed: q4_0's nibbles n = k + 8 as they are), four lanes of
// partial sums; two addp levels leave a chunk of 4 blocks' sums in one vector, in block order.
// Those sums start at the bias 1.5 2^23 (kQGemmNeonBias; q4_0 less 8 sum q, from QuantRows::sums
// or summed here) and are read as floats by one subtraction, then scaled by dq dk and added by
// one FMA per 4 blocks and row. Blocks past the last whole chunk go one at a time into their own
// accumulator. Each key's sum is a fixed tree of its blocks, wherever it falls in the call.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"
#include "quant_neon.hpp"

#if defined(__ARM_FEATURE_DOTPROD)

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace sdot_gemv {

constexpr int kChunk = 4;  // blocks a chunk: their sums one vector

// A block's values 0-15 and 16-31 (q8_0: k; q4_0: the stored nibbles n = k + 8).
template <int T>
inline void key_block(const uint8_t* blk, int8x16_t& lo, int8x16_t& hi) {
  if constexpr (T == 0) {
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 2));
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(blk + 18));
  } else {
    const uint8x16_t u = vld1q_u8(blk + 2);
    lo = vreinterpretq_s8_u8(vandq_u8(u, vdupq_n_u8(15)));
    hi = vreinterpretq_s8_u8(vshrq_n_u8(u, 4));
  }
}

inline int32x4_t block_products(int8x16_t lo, int8x16_t hi, const int8_t* q) {
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(q)), hi, vld1q_s8(q + 16));
}

// The 4 blocks' sums in block order.
inline int32x4_t chunk_sums(const int32x4_t* p) {
  return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

// The chunk's starts: the bias, less 8 sum q for q4_0.
template <int T>
inline int32x4_t chunk_starts(const QuantRows& q, int r, int64_t b) {
  const int32x4_t bias = vdupq_n_s32(kQGemmNeonBias);
  if constexpr (T == 0) return bias;
  int32x4_t sums;
  if (q.sums != nullptr) {
    sums = vld1q_s32(q.sums + r * q.blocks + b);
  } else {
    const int8x16_t ones = vdupq_n_s8(1);
    int32x4_t p[kChunk];
    for (int i = 0; i < kChunk; ++i)
      p[i] = block_products(ones, ones, q.qs + r * q.ld + (b + i) * 32);
    sums = chunk_sums(p);
  }
  return vsubq_s32(bias, vshlq_n_s32(sums, 3));
}

// The chunk's 4 scales as one word (scale_word), widened.
template <int T>
inline float32x4_t chunk_scales(const uint8_t* blk) {
  return vcvt_f32_f16(vreinterpret_f16_u64(vcreate_u64(scale_word<T>(blk))));
}

}  // namespace sdot_gemv

template <int T, int R>
void quant_gemv_sdot(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                     int64_t lds, float alpha) {
  using namespace sdot_gemv;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks, whole = blocks / kChunk * kChunk;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* key = k + j * ldk;
    float32x4_t acc[R], tail[R];
    for (int r = 0; r < R; ++r) acc[r] = tail[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < whole; b += kChunk) {
      const uint8_t* blk = key + b * BS;
      int8x16_t lo[kChunk], hi[kChunk];
      for (int i = 0; i < kChunk; ++i) key_block<T>(blk + i * BS, lo[i], hi[i]);
      const float32x4_t dk = chunk_scales<T>(blk);
      for (int r = 0; r < R; ++r) {
        const int8_t* qr = q.qs + r * q.ld + b * kQBlock;
        int32x4_t p[kChunk];
        for (int i = 0; i < kChunk; ++i) p[i] = block_products(lo[i], hi[i], qr + i * kQBlock);
        const float32x4_t sums = unbias_f32(vaddq_s32(chunk_sums(p), chunk_starts<T>(q, r, b)));
        acc[r] = vfmaq_f32(acc[r], sums, vmulq_f32(vld1q_f32(q.d + r * blocks + b), dk));
      }
    }
    for (int64_t b = whole; b < blocks; ++b) {
      const uint8_t* blk = key + b * BS;
      int8x16_t lo, hi;
      key_block<T>(blk, lo, hi);
      const float dk = convert_detail::f16_to_f32(scale_bits(blk));
      for (int r = 0; r < R; ++r) {
        const int8_t* qp = q.qs + r * q.ld + b * kQBlock;
        int32x4_t p = block_products(lo, hi, qp);
        if constexpr (T == 1) {  // -8 sum q, spread over the lanes' sums
          const int8x16_t ones = vdupq_n_s8(1);
          p = vsubq_s32(p, vshlq_n_s32(block_products(ones, ones, qp), 3));
        }
        tail[r] = vfmaq_n_f32(tail[r], vcvtq_f32_s32(p), q.d[r * blocks + b] * dk);
      }
    }
    for (int r = 0; r < R; ++r) s[r * lds + j] = alpha * (vaddvq_f32(acc[r]) + vaddvq_f32(tail[r]));
  }
}

// For one or two rows, as on x86 (where the stream, not the products, decided it; qemu has no
// timings).
inline void fill_gemv_sdot(QuantKernels& k) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.gemv_rows[0] = k.gemv_rows[1] = 2;
  k.gemv_name = "sdot";
  k.gemv[0][1] = &quant_gemv_sdot<0, 1>, k.gemv[0][2] = &quant_gemv_sdot<0, 2>;
  k.gemv[1][1] = &quant_gemv_sdot<1, 1>, k.gemv[1][2] = &quant_gemv_sdot<1, 2>;
#else
  (void)k;
#endif
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch

#endif  // __ARM_FEATURE_DOTPROD
