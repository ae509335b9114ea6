// Argument checks of the sgemm family, shared by the plain, batched and packed entry points.
#pragma once

#include "runtime/check.hpp"

namespace tessera::detail {

// op(A) is m x k: stored m x k (no_trans) or k x m (trans).
inline Status check_gemm_a(Transpose ta, int64_t m, int64_t k, const float* a, int64_t lda) {
  TESSERA_CHECK(check_transpose("ta", ta));
  TESSERA_CHECK(check_ld("lda", lda, ta == Transpose::no_trans ? k : m));
  return check_ptr("a", a, m > 0 && k > 0);
}

inline Status check_gemm_b(Transpose tb, int64_t k, int64_t n, const float* b, int64_t ldb) {
  TESSERA_CHECK(check_transpose("tb", tb));
  TESSERA_CHECK(check_ld("ldb", ldb, tb == Transpose::no_trans ? n : k));
  return check_ptr("b", b, k > 0 && n > 0);
}

inline Status check_gemm_sizes(int64_t m, int64_t n, int64_t k) {
  TESSERA_CHECK(check_nonneg("m", m));
  TESSERA_CHECK(check_nonneg("n", n));
  return check_nonneg("k", k);
}

inline Status check_gemm_c(int64_t m, int64_t n, const float* c, int64_t ldc) {
  TESSERA_CHECK(check_ld("ldc", ldc, n));
  return check_ptr("c", c, m > 0 && n > 0);
}

// The elements op(A), op(B) and C span (checked: see tensor_span); 0 for an empty operand
// (A and B are not read when k = 0).
struct GemmSpans {
  int64_t a = 0, b = 0, c = 0;
};
inline Status gemm_spans(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                         int64_t ldb, int64_t ldc, GemmSpans& s) {
  const bool at = ta == Transpose::trans, bt = tb == Transpose::trans;
  TESSERA_CHECK(matrix_span("a", m > 0 ? (at ? k : m) : 0, at ? m : k, lda, s.a));
  TESSERA_CHECK(matrix_span("b", n > 0 ? (bt ? n : k) : 0, bt ? k : n, ldb, s.b));
  return matrix_span("c", m, n, ldc, s.c);
}

}  // namespace tessera::detail
