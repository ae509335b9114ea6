// Products of one A against several prepacked B (tessera_sgemm_packed's buffers): the
// projections of one input (a layer's Q, K and V).
#pragma once

#include <cstdint>

#include "runtime/check.hpp"

namespace tessera::detail {

// C_i = A B_i + beta_i C_i, B_i packed (n_i columns, k rows), A m x k (lda); beta 0 or 1.
struct PackedProduct {
  int64_t n;
  const void* packed;
  float beta;
  float* c;
  int64_t ldc;
};

// Up to kMaxSharedProducts (gemm_quant.hpp) products, each C bitwise the one sgemm_packed writes.
// Block-type panels of one type share A's rounding and one parallel region (gemm_quant_shared_a);
// others run one by one. The caller has checked the arguments (a layer's own buffers).
Status sgemm_packed_shared_a(int64_t m, int64_t k, const float* a, int64_t lda,
                             const PackedProduct* p, int count);

}  // namespace tessera::detail
