// Half-precision GEMM micro-kernel computing in fp16 (FEAT_FP16: fmla v.8h, v.8h, v.h[lane]),
// the kernel of tessera_hgemm on tables whose CPU has half-precision arithmetic.
//
// Contract (HgemmPackedFn, arch/kernels.hpp): for r = R rows and nr <= NR = 8 NV columns,
//   C[i, j] = alpha S[i, j] + beta C[i, j],  S[i, j] = sum over p < k of A(i, p) B(p, j),
// with A a packed f16 panel (A(i, p) at a[p MR + i]), B a packed f16 panel (B(p, j) at
// b[p NR + j]) and C float32, rows ldc apart. S is summed in fp16 by fused multiply-adds over
// chunks of kHgemmChunk k steps, each FMA rounded to f16, and the chunk sums (times alpha) are
// added into C in float32: the error of a chunk is bounded by g_c sum |A B| (c = 64, u = 2^-11:
// 3.2%), where one fp16 sum over all of k has no bound past k = 2048. A chunk partial sum past
// 65504 is inf. beta = 0 never reads C. Columns nr..NR-1 of B are read (zero padding) and never
// stored. Stateless; allocates nothing.
//
// Register tile (8 x 16): 16 registers hold S for 8 rows x 2 vectors of 8 columns (8 x 24 ran
// out of v0-v15 for the element operand and spilled); each k step
// loads the 8 rows' A(i, p) in one 128-bit register (lane-indexed FMA picks the row: xsimd 8.1
// has no fp16 type, so ACLE intrinsics) and 16 B values in two.
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../common/gemm_ukernel.hpp"
#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int kHgemmChunk = 64;

// acc += b * a[L]: FMLA (by element). GCC 12 turns vfmaq_laneq_f16 into a DUP of the lane
// shared by the row's FMAs plus vector FMLAs (7 DUPs per 16 FMAs in the 8 x 16 loop); the
// asm keeps the by-element form ("x": the element operand must be one of v0-v15).
template <int L>
TESSERA_ALWAYS_INLINE float16x8_t fmla_lane(float16x8_t acc, float16x8_t b, float16x8_t a) {
  asm("fmla %0.8h, %1.8h, %2.h[%3]" : "+w"(acc) : "w"(b), "x"(a), "i"(L));
  return acc;
}

// C row (+)= alpha S in float32: C = alpha S + beta C when `read` (beta = 1 after the first chunk),
// C = alpha S otherwise.
template <int NV>
TESSERA_ALWAYS_INLINE void hgemm_add_row(const float16x8_t (&s)[NV], float* c, int64_t nr,
                                         float alpha, float beta, bool read) {
  alignas(16) float row[8 * NV];
  const bool whole = nr == 8 * NV;
  float* out = whole ? c : row;
  if (!whole && read) std::memcpy(row, c, size_t(nr) * 4);
  for (int v = 0; v < NV; ++v) {
    float32x4_t lo = vmulq_n_f32(vcvt_f32_f16(vget_low_f16(s[v])), alpha);
    float32x4_t hi = vmulq_n_f32(vcvt_high_f32_f16(s[v]), alpha);
    if (read) {
      lo = vfmaq_n_f32(lo, vld1q_f32(out + 8 * v), beta);
      hi = vfmaq_n_f32(hi, vld1q_f32(out + 8 * v + 4), beta);
    }
    vst1q_f32(out + 8 * v, lo);
    vst1q_f32(out + 8 * v + 4, hi);
  }
  if (!whole) std::memcpy(c, row, size_t(nr) * 4);
}

template <int MR, int R, int NV>
void hgemm_ukernel_neon64_fp16(int64_t k, const uint16_t* a, const uint16_t* b, float* c,
                               int64_t ldc, int64_t nr, float alpha, float beta) {
  static_assert(MR == 8 && R >= 1 && R <= MR, "one 128-bit register of A per k step");
  const auto* ah = reinterpret_cast<const float16_t*>(a);
  const auto* bh = reinterpret_cast<const float16_t*>(b);
  int64_t p0 = 0;
  do {  // once even for k = 0: C = beta C
    const int64_t p1 = std::min<int64_t>(k, p0 + kHgemmChunk);
    float16x8_t s[R][NV];
    TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) s[i][v] =
        vdupq_n_f16(0);
    for (int64_t p = p0; p < p1; ++p, ah += MR, bh += 8 * NV) {
      float16x8_t bv[NV];
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) bv[v] = vld1q_f16(bh + 8 * v);
      const float16x8_t av = vld1q_f16(ah);
      // Lane indices must be constants: one line per row.
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
        if constexpr (R > 0) s[0][v] = fmla_lane<0>(s[0][v], bv[v], av);
        if constexpr (R > 1) s[1][v] = fmla_lane<1>(s[1][v], bv[v], av);
        if constexpr (R > 2) s[2][v] = fmla_lane<2>(s[2][v], bv[v], av);
        if constexpr (R > 3) s[3][v] = fmla_lane<3>(s[3][v], bv[v], av);
        if constexpr (R > 4) s[4][v] = fmla_lane<4>(s[4][v], bv[v], av);
        if constexpr (R > 5) s[5][v] = fmla_lane<5>(s[5][v], bv[v], av);
        if constexpr (R > 6) s[6][v] = fmla_lane<6>(s[6][v], bv[v], av);
        if constexpr (R > 7) s[7][v] = fmla_lane<7>(s[7][v], bv[v], av);
      }
    }
    const bool first = p0 == 0;
    TESSERA_UNROLL for (int i = 0; i < R; ++i) hgemm_add_row<NV>(
        s[i], c + i * ldc, nr, alpha, first ? beta : 1.0f, !first || beta != 0.0f);
    p0 = p1;
  } while (p0 < k);
}

template <int MR, int NV, int... R>
void fill_hgemm_neon64_fp16(HalfGemmKernels& h, std::integer_sequence<int, R...>) {
  h.mr = MR, h.nr = 8 * NV, h.chunk = kHgemmChunk;
  ((h.packed[R + 1] = &hgemm_ukernel_neon64_fp16<MR, R + 1, NV>), ...);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
