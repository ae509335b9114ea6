// Tessera C++ API: single-precision GEMM (see tessera.h for the contract).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API Status sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc);

TESSERA_API Status sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n,
                                         int64_t k, float alpha, const float* a, int64_t lda,
                                         int64_t stride_a, const float* b, int64_t ldb,
                                         int64_t stride_b, float beta, float* c, int64_t ldc,
                                         int64_t stride_c, int64_t batch);

// Bytes for op(B) packed for the active kernel table; 0 (and last_error set) for bad arguments.
TESSERA_API size_t sgemm_pack_b_size(Transpose tb, int64_t k, int64_t n);
TESSERA_API Status sgemm_pack_b(Transpose tb, int64_t k, int64_t n, const float* b, int64_t ldb,
                                void* packed, size_t packed_bytes);
// The same from a B stored as float32, f16 or bf16 (ldb counts elements of b_type): the packed
// panels hold it widened to float32, for sgemm_packed; see tessera_sgemm_pack_b_ex.
TESSERA_API Status sgemm_pack_b_ex(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b,
                                   int64_t ldb, void* packed, size_t packed_bytes);
// op(B) stored as f16 or bf16 packed in the same panels with its elements kept in 16 bits (half
// the bytes; sgemm_packed widens them as it reads); see tessera_sgemm_pack_b16.
TESSERA_API size_t sgemm_pack_b16_size(Transpose tb, int64_t k, int64_t n);
TESSERA_API Status sgemm_pack_b16(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b,
                                  int64_t ldb, void* packed, size_t packed_bytes);
// Block-type weights (q8_0, q4_0; B stored n x k, tb = trans) packed for sgemm_packed in the
// table's integer tile layout; see tessera_sgemm_pack_bq.
TESSERA_API size_t sgemm_pack_bq_size(Transpose tb, int64_t k, int64_t n, DType b_type);
TESSERA_API Status sgemm_pack_bq(Transpose tb, int64_t k, int64_t n, DType b_type, const void* b,
                                 int64_t ldb, void* packed, size_t packed_bytes);
TESSERA_API Status sgemm_packed(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha,
                                const float* a, int64_t lda, const void* packed, float beta,
                                float* c, int64_t ldc);

// C = alpha op(A) op(B) + beta C with A and B stored as float32, f16 or bf16 (lda and ldb count
// elements of their type) and C float32; see tessera_gemm_ex.
TESSERA_API Status gemm_ex(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                           DType a_type, const void* a, int64_t lda, DType b_type, const void* b,
                           int64_t ldb, float beta, float* c, int64_t ldc);

// C = alpha op(A) op(B) + beta C with A, B and C f16, summed in fp16 where the kernel table has
// fp16 arithmetic; see tessera_hgemm for the error bound.
TESSERA_API Status hgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
                         void* c, int64_t ldc);

}  // namespace tessera
