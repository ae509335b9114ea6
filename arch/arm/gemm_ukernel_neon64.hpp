// AArch64 packed SGEMM micro-kernel with lane-indexed FMA (fmla v.4s, v.4s, v.s[lane]).
//
// xsimd has no lane-indexed FMA: its broadcast form costs a dup per A element, one extra
// instruction per NV FMAs (measured elsewhere: 22-30% slower on Cortex-A53/A57). Here A(r, p)
// for 4 rows arrives in one 128-bit load and each FMA picks its row by lane.
//
// Register tile (8 x 12, 32 q registers):
//    v0..v23   acc[r][v]: rows 0..7 x 3 vectors of 4 columns
//    v24..v26  row p of the B panel (12 floats)
//    v27..v28  A(0..3, p), A(4..7, p)
// Same contract as gemm_ukernel_packed (arch/common/gemm_ukernel.hpp); rows R must be a
// multiple of 4 (partial panels use the broadcast kernel).
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

#include "../common/gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// Arch: xsimd::neon64, or a table's own type derived from it (arch/arm/neon64_v82.cpp), so
// that each table's instantiations are its own.
template <class Arch, int MR, int R, int NV>
void gemm_ukernel_packed_neon64_lane(int64_t kc, const float* a, const float* b, float* c,
                                     int64_t ldc, int64_t nr, float alpha, float beta) {
  static_assert(R % 4 == 0, "lane kernel needs whole groups of 4 rows");
  using B = xsimd::batch<float, Arch>;
  prefetch_c<R, NV, 4, CacheLevel::l1>(c, ldc);
  float32x4_t acc[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] =
      vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NV * 4) {
    float32x4_t bv[NV];
    TESSERA_UNROLL for (int v = 0; v < NV; ++v) bv[v] = vld1q_f32(b + 4 * v);
    TESSERA_UNROLL for (int g = 0; g < R / 4; ++g) {
      const float32x4_t av = vld1q_f32(a + 4 * g);
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) {
        acc[4 * g + 0][v] = vfmaq_laneq_f32(acc[4 * g + 0][v], bv[v], av, 0);
        acc[4 * g + 1][v] = vfmaq_laneq_f32(acc[4 * g + 1][v], bv[v], av, 1);
        acc[4 * g + 2][v] = vfmaq_laneq_f32(acc[4 * g + 2][v], bv[v], av, 2);
        acc[4 * g + 3][v] = vfmaq_laneq_f32(acc[4 * g + 3][v], bv[v], av, 3);
      }
    }
  }
  B out[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) out[i][v] =
      B(acc[i][v]);
  store_tile<Arch, R, NV>(out, c, ldc, nr, alpha, beta);
}

// Lane kernel for whole groups of four rows, broadcast kernel otherwise.
template <class Arch, int MR, int NV>
struct Neon64PackedKernel {
  template <int R>
  static constexpr GemmPackedFn get() {
    if constexpr (R % 4 == 0)
      return &gemm_ukernel_packed_neon64_lane<Arch, MR, R, NV>;
    else
      return &gemm_ukernel_packed<Arch, MR, R, NV>;
  }
  static constexpr GemmPackedRunFn run() {
    if constexpr (MR % 4 == 0)
      return &packed_run_of<&gemm_ukernel_packed_neon64_lane<Arch, MR, MR, NV>>;
    else
      return &gemm_ukernel_packed_run<Arch, MR, NV>;
  }
  static constexpr GemmStridedRunFn strided_run() {
    return &strided_run_of<&gemm_ukernel<Arch, MR, NV>>;
  }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
