// bf16 x bf16 -> float32 GEMM on a table's bf16 dot-product tile (arch::Bf16DotKernels): the
// executor gemm_ex takes where the table has one (AVX512_BF16).
#pragma once

#include <cstdint>

#include "arch/kernels.hpp"
#include "tessera/common.hpp"

namespace tessera::detail {

struct Bf16Gemm {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const uint16_t *a, *b;
  int64_t lda, ldb;
  float* c;
  int64_t ldc;
};

// C = alpha op(A) op(B) + beta C for m, n, k > 0 (the caller takes the empty cases).
Status gemm_bf16_dot(const arch::Bf16DotKernels& d, const Bf16Gemm& q);

// Few rows of A against B^T (stored n x k) on the dot kernels, B read in place: true where the
// table has them and the product is that shape.
bool bf16_dot_rows_fit(const arch::Bf16DotKernels& d, const Bf16Gemm& q);
Status gemm_bf16_dot_rows(const arch::Bf16DotKernels& d, const Bf16Gemm& q);

}  // namespace tessera::detail
