// Reference SGEMM: the definition, one double-accumulated dot product per element of C.
#include <vector>

#include "tessera/reference.hpp"

namespace tessera::reference {

void sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      if (alpha != 0.0f) {  // BLAS: alpha = 0 reads neither A nor B
        for (int64_t p = 0; p < k; ++p) {
          const double aip = ta == Transpose::no_trans ? a[i * lda + p] : a[p * lda + i];
          const double bpj = tb == Transpose::no_trans ? b[p * ldb + j] : b[j * ldb + p];
          acc += aip * bpj;
        }
      }
      double result = static_cast<double>(alpha) * acc;
      if (beta != 0.0f) result += static_cast<double>(beta) * c[i * ldc + j];  // beta = 0: C unread
      c[i * ldc + j] = static_cast<float>(result);
    }
  }
}

void sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, int64_t stride_a, const float* b,
                           int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                           int64_t stride_c, int64_t batch) {
  for (int64_t i = 0; i < batch; ++i) {
    reference::sgemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                     c + i * stride_c, ldc);
  }
}

void hgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
           const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, uint16_t* c,
           int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      if (alpha != 0.0f) {
        for (int64_t p = 0; p < k; ++p) {
          const double aip =
              f16_to_f32(ta == Transpose::no_trans ? a[i * lda + p] : a[p * lda + i]);
          const double bpj =
              f16_to_f32(tb == Transpose::no_trans ? b[p * ldb + j] : b[j * ldb + p]);
          acc += aip * bpj;
        }
      }
      double result = static_cast<double>(alpha) * acc;
      if (beta != 0.0f) result += static_cast<double>(beta) * f16_to_f32(c[i * ldc + j]);
      c[i * ldc + j] = f32_to_f16(static_cast<float>(result));
    }
  }
}

void gemm_block_b(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, tessera_dtype b_type, const void* b, int64_t ldb, float beta,
                  float* c, int64_t ldc, bool round_a) {
  const size_t row_bytes = storage_bytes(b_type, ldb);
  std::vector<float> bf(size_t(n * k)), row(static_cast<size_t>(k)), ar(static_cast<size_t>(k));
  std::vector<uint8_t> blocks(storage_bytes(TESSERA_Q8_0, k));
  for (int64_t j = 0; j < n; ++j)
    dequantize(b_type, k, static_cast<const uint8_t*>(b) + size_t(j) * row_bytes,
               &bf[size_t(j * k)]);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p)
      row[size_t(p)] = ta == Transpose::no_trans ? a[i * lda + p] : a[p * lda + i];
    if (round_a) {
      quantize(TESSERA_Q8_0, k, row.data(), blocks.data());
      dequantize(TESSERA_Q8_0, k, blocks.data(), ar.data());
    } else {
      ar = row;
    }
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      if (alpha != 0.0f)
        for (int64_t p = 0; p < k; ++p) acc += double(ar[size_t(p)]) * bf[size_t(j * k + p)];
      double result = double(alpha) * acc;
      if (beta != 0.0f) result += double(beta) * c[i * ldc + j];
      c[i * ldc + j] = float(result);
    }
  }
}

}  // namespace tessera::reference
