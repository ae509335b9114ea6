// Softmax-family driver: argument checks, then the kernels of the active table.
#include "tessera/softmax.hpp"

#include "check.hpp"
#include "tessera/reference.hpp"

namespace tessera {
namespace {

Status check_rows(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale) {
  TESSERA_CHECK(detail::check_nonneg("rows", rows));
  TESSERA_CHECK(detail::check_nonneg("cols", cols));
  TESSERA_CHECK(detail::check_ld("ldx", ldx, cols));
  TESSERA_CHECK(detail::check_ptr("x", x, rows > 0 && cols > 0));
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return detail::fail(Status::invalid_argument, "scale = %g must be finite and > 0", scale);
  return Status::ok;
}

Status check_output(int64_t rows, int64_t cols, const float* x, int64_t ldx, const float* y,
                    int64_t ldy) {
  TESSERA_CHECK(detail::check_ld("ldy", ldy, cols));
  TESSERA_CHECK(detail::check_ptr("y", y, rows > 0 && cols > 0));
  if (detail::partially_overlaps(x, ldx, y, ldy, rows, cols))
    return detail::fail(Status::invalid_argument,
                        "y overlaps x without being the same matrix (in place needs y == x, "
                        "ldy == ldx)");
  return Status::ok;
}

}  // namespace

Status softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
               float scale) {
  TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
  TESSERA_CHECK(check_output(rows, cols, x, ldx, y, ldy));
  if (rows == 0 || cols == 0) return Status::ok;
  reference::softmax(rows, cols, x, ldx, y, ldy, scale);
  return Status::ok;
}

Status log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                   float scale) {
  TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
  TESSERA_CHECK(check_output(rows, cols, x, ldx, y, ldy));
  if (rows == 0 || cols == 0) return Status::ok;
  reference::log_softmax(rows, cols, x, ldx, y, ldy, scale);
  return Status::ok;
}

Status logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
                 float* out) {
  TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
  TESSERA_CHECK(detail::check_ptr("out", out, rows > 0));
  if (rows == 0) return Status::ok;
  reference::logsumexp(rows, cols, x, ldx, scale, out);
  return Status::ok;
}

}  // namespace tessera
