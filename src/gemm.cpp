// SGEMM driver: argument checks, then the kernels of the active table.
#include "tessera/gemm.hpp"

#include <cstring>

#include "dispatch.hpp"
#include "gemm_check.hpp"
#include "tessera/reference.hpp"

namespace tessera {
namespace {

// The packed-B buffer starts with this header so that a buffer packed for another shape or
// another kernel table is rejected instead of silently misread.
struct PackedBHeader {
  char magic[8];
  char isa[16];
  int64_t k, n;
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(PackedBHeader) <= kHeaderBytes, "header must fit its slot");
constexpr char kMagic[8] = {'T', 'S', 'R', 'P', 'A', 'C', 'K', '1'};

}  // namespace

Status sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
  TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
  TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
  TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
  if (m == 0 || n == 0) return Status::ok;
  reference::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return Status::ok;
}

Status sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float* a, int64_t lda, int64_t stride_a,
                             const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                             int64_t ldc, int64_t stride_c, int64_t batch) {
  TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
  TESSERA_CHECK(detail::check_nonneg("batch", batch));
  TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
  TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
  TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
  TESSERA_CHECK(detail::check_nonneg("stride_a", stride_a));
  TESSERA_CHECK(detail::check_nonneg("stride_b", stride_b));
  if (batch > 1 && m > 0 && n > 0 && stride_c < (m - 1) * ldc + n) {
    return detail::fail(Status::invalid_argument,
                        "stride_c = %lld makes the C matrices overlap (needs >= %lld)",
                        (long long)stride_c, (long long)((m - 1) * ldc + n));
  }
  if (m == 0 || n == 0 || batch == 0) return Status::ok;
  reference::sgemm_strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                   beta, c, ldc, stride_c, batch);
  return Status::ok;
}

size_t sgemm_pack_b_size(Transpose tb, int64_t k, int64_t n) {
  if (detail::check_transpose("tb", tb) != Status::ok || detail::check_nonneg("k", k) != Status::ok ||
      detail::check_nonneg("n", n) != Status::ok)
    return 0;
  return kHeaderBytes + sizeof(float) * static_cast<size_t>(k) * static_cast<size_t>(n);
}

Status sgemm_pack_b(Transpose tb, int64_t k, int64_t n, const float* b, int64_t ldb,
                    void* packed) {
  TESSERA_CHECK(detail::check_nonneg("k", k));
  TESSERA_CHECK(detail::check_nonneg("n", n));
  TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
  TESSERA_CHECK(detail::check_ptr("packed", packed, true));
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) != 0)
    return detail::fail(Status::invalid_argument, "packed must be aligned to %zu bytes",
                        alignof(float));
  PackedBHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  std::strncpy(h.isa, detail::active_table().name, sizeof h.isa - 1);
  h.k = k;
  h.n = n;
  std::memcpy(packed, &h, sizeof h);
  float* out = reinterpret_cast<float*>(static_cast<char*>(packed) + kHeaderBytes);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j)
      out[p * n + j] = tb == Transpose::no_trans ? b[p * ldb + j] : b[j * ldb + p];
  return Status::ok;
}

Status sgemm_packed(Transpose ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const void* packed, float beta, float* c, int64_t ldc) {
  TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
  TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
  TESSERA_CHECK(detail::check_ptr("packed", packed, true));
  TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) != 0)
    return detail::fail(Status::invalid_argument, "packed must be aligned to %zu bytes",
                        alignof(float));
  PackedBHeader h;
  std::memcpy(&h, packed, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    return detail::fail(Status::invalid_argument, "packed was not written by tessera_sgemm_pack_b");
  if (h.k != k || h.n != n)
    return detail::fail(Status::invalid_argument,
                        "packed holds a %lld x %lld B but k = %lld, n = %lld", (long long)h.k,
                        (long long)h.n, (long long)k, (long long)n);
  h.isa[sizeof h.isa - 1] = '\0';
  if (std::strcmp(h.isa, detail::active_table().name) != 0)
    return detail::fail(Status::invalid_argument,
                        "packed was packed for kernel table \"%s\" but \"%s\" is active", h.isa,
                        detail::active_table().name);
  if (m == 0 || n == 0) return Status::ok;
  const float* bp = reinterpret_cast<const float*>(static_cast<const char*>(packed) + kHeaderBytes);
  reference::sgemm(ta, Transpose::no_trans, m, n, k, alpha, a, lda, bp, n > 0 ? n : 1, beta, c,
                   ldc);
  return Status::ok;
}

}  // namespace tessera
