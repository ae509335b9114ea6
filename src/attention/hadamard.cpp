// The Walsh-Hadamard rotation: butterflies over each block in place, stride by stride (the
// inner loops run over contiguous values and vectorize), then the scale.
#include "attention/hadamard.hpp"

#include <cmath>
#include <cstring>

#include "runtime/check.hpp"
#include "runtime/threading.hpp"

namespace tessera::detail {

void hadamard_rows(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx, float* y,
                   int64_t ldy) {
  const float scale = float(1.0 / std::sqrt(double(n)));
  for (int64_t r = 0; r < rows; ++r) {
    float* out = y + r * ldy;
    if (out != x + r * ldx) std::memmove(out, x + r * ldx, sizeof(float) * size_t(dim));
    for (int64_t b = 0; b < dim; b += n) {
      float* v = out + b;
      for (int64_t h = 1; h < n; h *= 2)
        for (int64_t i = 0; i < n; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            const float a = v[j], c = v[j + h];
            v[j] = a + c, v[j + h] = a - c;
          }
      for (int64_t j = 0; j < n; ++j) v[j] *= scale;
    }
  }
}

}  // namespace tessera::detail

namespace tessera {

Status hadamard(int64_t rows, int64_t dim, int64_t n, const float* x, int64_t ldx, float* y,
                int64_t ldy) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_nonneg("rows", rows));
    TESSERA_CHECK(detail::check_positive("dim", dim));
    if (n < 1 || (n & (n - 1)) != 0 || dim % n != 0)
      return detail::fail(Status::invalid_argument,
                          "n = %lld must be a power of two dividing dim = %lld", (long long)n,
                          (long long)dim);
    TESSERA_CHECK(detail::check_ld("ldx", ldx, dim));
    TESSERA_CHECK(detail::check_ld("ldy", ldy, dim));
    TESSERA_CHECK(detail::check_ptr("x", x, rows > 0));
    TESSERA_CHECK(detail::check_ptr("y", y, rows > 0));
    if (rows > 0 && !(x == y && ldx == ldy)) {
      int64_t xs, ys;
      TESSERA_CHECK(detail::matrix_span("x", rows, dim, ldx, xs));
      TESSERA_CHECK(detail::matrix_span("y", rows, dim, ldy, ys));
      TESSERA_CHECK(
          detail::check_disjoint(detail::region("y", y, ys, 4), {detail::region("x", x, xs, 4)}));
    }
    detail::hadamard_rows(rows, dim, n, x, ldx, y, ldy);
    return Status::ok;
  });
}

}  // namespace tessera
