// ARMv7 NEON (VFPv4) packed SGEMM micro-kernel.
//
// ARMv7 has no by-lane VFMA (only the unfused VMLA by scalar), so A(r, p) must be broadcast.
// xsimd's broadcast goes through a core register (ldr + vdup.32 q, r: a core-to-NEON transfer
// per element, slow on Cortex-A7/A9); vld1.32 {dN[], dN+1[]} loads and replicates in one NEON
// instruction instead.
//
// Register tile (4 x 8, 16 q registers):
//    q4..q7, q11..q15   acc[r][v]: rows 0..3 x 2 vectors of 4 columns (8 registers)
//    q8, q10            row p of the B panel
//    q9                 A(r, p) replicated
// Same contract as gemm_ukernel_packed (arch/common/gemm_ukernel.hpp).
#pragma once

#include "../common/kernel_ns.hpp"

#include <arm_neon.h>

#include "../common/gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

template <int MR, int R, int NV>
void gemm_ukernel_packed_neon32_dup(int64_t kc, const float* a, const float* b, float* c,
                                    int64_t ldc, int64_t nr, float alpha, float beta) {
  using B = xsimd::batch<float, xsimd::neon>;
  prefetch_c<R, NV, 4, CacheLevel::l1>(c, ldc);
  float32x4_t acc[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] =
      vdupq_n_f32(0.0f);
  for (int32_t p = 0; p < static_cast<int32_t>(kc); ++p, a += MR, b += NV * 4) {
    float32x4_t bv[NV];
    TESSERA_UNROLL for (int v = 0; v < NV; ++v) bv[v] = vld1q_f32(b + 4 * v);
    TESSERA_UNROLL for (int i = 0; i < R; ++i) {
      const float32x4_t ai = vld1q_dup_f32(a + i);
      TESSERA_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] = vfmaq_f32(acc[i][v], bv[v], ai);
    }
  }
  B out[R][NV];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int v = 0; v < NV; ++v) out[i][v] =
      B(acc[i][v]);
  store_tile<xsimd::neon, R, NV>(out, c, ldc, nr, alpha, beta);
}

template <int MR, int NV>
struct Neon32PackedKernel {
  template <int R>
  static constexpr GemmPackedFn get() {
    return &gemm_ukernel_packed_neon32_dup<MR, R, NV>;
  }
  static constexpr GemmPackedRunFn run() {
    return &packed_run_of<&gemm_ukernel_packed_neon32_dup<MR, MR, NV>>;
  }
  static constexpr GemmStridedRunFn strided_run() {
    return &strided_run_of<&gemm_ukernel<xsimd::neon, MR, NV>>;
  }
};

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
