// bf16 x bf16 -> float32 micro-kernel on FEAT_BF16's BFDOT (by element): each instruction adds,
// to 4 float32 sums, the products of 4 pairs of bf16 with one pair of A. Inline assembly: xsimd
// 8.1 has no bf16 type, and the by-element form is kept as written (as hgemm_neon64_fp16.hpp's
// FMLA).
//
// Contract: as bf16_dot_packed in arch/x86/gemm_bf16_dot_avx512.hpp (panels of k pairs, laid
// out as arch/common/bf16_pairs.hpp says; C = alpha acc + beta C for R x nr, nr <= NR = 12;
// beta == 0 never reads C), except for the rounding: BFDOT (without FEAT_EBF16) sums each
// pair's two products and the accumulator with round-to-odd and flushes subnormal inputs and
// results to zero, within the same error bound.
//
// Register tile (8 x 12): 24 accumulators (C rows 0..7 x 3 vectors of 4 columns), 3 B vectors
// (4 columns x 1 pair each) and the 8 rows' pairs in 2 registers, the row picked by the lane:
// 29 of 32 q registers; 24 BFDOT against 5 loads per pair step.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "../common/gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int kBf16DotNeonNV = 3;

// acc += the 4 column pairs of b times pair L of a.
template <int L>
TESSERA_ALWAYS_INLINE float32x4_t bfdot_lane(float32x4_t acc, uint16x8_t b, uint16x8_t a) {
  asm("bfdot %0.4s, %1.8h, %2.2h[%3]" : "+w"(acc) : "w"(b), "w"(a), "i"(L));
  return acc;
}

template <int MR, int R>
void bf16_dot_packed_neon64(int64_t pairs, const uint16_t* a, const uint16_t* b, float* c,
                            int64_t ldc, int64_t nr, float alpha, float beta) {
  static_assert(MR == 8 && R >= 1 && R <= MR, "two registers of A pairs per pair step");
  constexpr int NV = kBf16DotNeonNV;
  float32x4_t acc[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] =
      vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < pairs; ++p, a += 2 * MR, b += 8 * NV) {
    uint16x8_t bv[NV];
    TESSERA_UNROLL for (int v = 0; v < NV; ++v) bv[v] = vld1q_u16(b + 8 * v);
    const uint16x8_t a0 = vld1q_u16(a);
    const uint16x8_t a1 = R > 4 ? vld1q_u16(a + 8) : a0;
    // Lane indices must be constants: one line per row.
    TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
      if constexpr (R > 0) acc[0][v] = bfdot_lane<0>(acc[0][v], bv[v], a0);
      if constexpr (R > 1) acc[1][v] = bfdot_lane<1>(acc[1][v], bv[v], a0);
      if constexpr (R > 2) acc[2][v] = bfdot_lane<2>(acc[2][v], bv[v], a0);
      if constexpr (R > 3) acc[3][v] = bfdot_lane<3>(acc[3][v], bv[v], a0);
      if constexpr (R > 4) acc[4][v] = bfdot_lane<0>(acc[4][v], bv[v], a1);
      if constexpr (R > 5) acc[5][v] = bfdot_lane<1>(acc[5][v], bv[v], a1);
      if constexpr (R > 6) acc[6][v] = bfdot_lane<2>(acc[6][v], bv[v], a1);
      if constexpr (R > 7) acc[7][v] = bfdot_lane<3>(acc[7][v], bv[v], a1);
    }
  }
  const bool whole = nr == 4 * NV;
  TESSERA_UNROLL for (int i = 0; i < R; ++i) {
    alignas(16) float row[4 * NV];
    float* out = whole ? c + i * ldc : row;
    if (!whole && beta != 0.0f) std::memcpy(row, c + i * ldc, size_t(nr) * 4);
    TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
      float32x4_t r = vmulq_n_f32(acc[i][v], alpha);
      if (beta != 0.0f) r = vfmaq_n_f32(r, vld1q_f32(out + 4 * v), beta);
      vst1q_f32(out + 4 * v, r);
    }
    if (!whole) std::memcpy(c + i * ldc, row, size_t(nr) * 4);
  }
}

// The BFDOT ceiling: 24 chains (BFDOT's latency on the cores that have it is up to 6 cycles at
// 2-4 per cycle), 16 flops each (4 lanes, 2 products and 2 additions). Each step adds 2e-6.
inline float bf16_dot_peak_neon64(int64_t iters) {
  constexpr int N = 24;
  float32x4_t acc[N];
  for (int i = 0; i < N; ++i) acc[i] = vdupq_n_f32(1.0f + 0.01f * float(i));
  const uint16x8_t x = vdupq_n_u16(0x3a83);  // bf16 0.001
  for (int64_t it = 0; it < iters; ++it) {
    TESSERA_UNROLL for (int i = 0; i < N;
                        ++i) asm("bfdot %0.4s, %1.8h, %2.8h" : "+w"(acc[i]) : "w"(x), "w"(x));
  }
  float32x4_t sum = acc[0];
  for (int i = 1; i < N; ++i) sum = vaddq_f32(sum, acc[i]);
  return vaddvq_f32(sum);
}
inline constexpr int kBf16DotNeonPeakFlopsPerIter = 24 * 16;

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
