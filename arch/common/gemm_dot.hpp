// SGEMM dot-product kernel for op(B) = B^T with few rows of A (the decode shape q K^T):
// C(i, j) = alpha sum_p A(i, p) B(j, p) + beta C(i, j) for R rows and NJ columns, both A rows
// and B rows contiguous along p, so K is read in place, once, with no packing (a packed path
// would read and write all of K before using it once).
//
// Contract: R <= dot_rows, NJ columns exactly; k >= 0; beta == 0 never reads C. The sum order
// (SIMD lanes, then lane reduction, then the scalar tail) depends on k alone.
// Register tile (AVX-512, 4 x 4): 16 accumulators acc[i][j] (16 lanes of partial dot
// products each), 4 A vectors and 4 B vectors per step: 24 of 32 zmm.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cstdint>

namespace tessera::arch {

template <class Arch, int R, int NJ>
void gemm_dot_nt(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, float alpha, float beta) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  B acc[R][NJ];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NJ; ++j) acc[i][j] = B(0.0f);
  int64_t p = 0;
  for (; p + W <= k; p += W) {
    // The next NJ rows of K, one line ahead: the rows are ldb apart, too many interleaved
    // streams for the hardware prefetcher to follow on its own.
    for (int j = 0; j < NJ; ++j) __builtin_prefetch(b + (j + NJ) * ldb + p, 0, 3);
    B av[R], bv[NJ];
    for (int i = 0; i < R; ++i) av[i] = B::load_unaligned(a + i * lda + p);
    for (int j = 0; j < NJ; ++j) bv[j] = B::load_unaligned(b + j * ldb + p);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < NJ; ++j) acc[i][j] = xsimd::fma(av[i], bv[j], acc[i][j]);
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NJ; ++j) {
      float sum = xsimd::hadd(acc[i][j]);
      for (int64_t q = p; q < k; ++q) sum += a[i * lda + q] * b[j * ldb + q];
      float& dst = c[i * ldc + j];
      dst = beta != 0.0f ? alpha * sum + beta * dst : alpha * sum;
    }
}

}  // namespace tessera::arch
