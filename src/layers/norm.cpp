// tessera_norm and tessera_glu: the table's row kernels (arch/common/norm.hpp) over the rows,
// split across threads in fixed chunks of rows (a row's result never depends on the split).
#include <algorithm>
#include <cmath>

#include "layers/norm.hpp"

#include "gemm/gemm_split.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/threading.hpp"
#include "tessera/layers.hpp"

namespace tessera {
namespace {

using detail::fail;

// Below this many values a call runs on the calling thread (a decode step's row: the fork and
// join would cost more than the row).
constexpr int64_t kMinParallelValues = int64_t(1) << 15;

template <class F>
void over_rows(int64_t rows, int64_t dim, const F& row) {
  const int64_t per_task = std::max<int64_t>(1, kMinParallelValues / 2 / dim);
  const int64_t tasks = detail::ceil_div(rows, per_task);
  if (rows * dim < kMinParallelValues || tasks < 2 || tbb::this_task_arena::max_concurrency() < 2) {
    for (int64_t r = 0; r < rows; ++r) row(r);
    return;
  }
  detail::gemm_split::for_each_task(tasks, [&](int64_t t) {
    for (int64_t r = t * per_task; r < std::min(rows, (t + 1) * per_task); ++r) row(r);
  });
}

// A rows x dim matrix argument: its ld and its span.
Status check_rows(const char* name, const char* ld_name, const void* p, int64_t rows, int64_t dim,
                  int64_t ld, int64_t& span) {
  TESSERA_CHECK(detail::check_ld(ld_name, ld, dim));
  TESSERA_CHECK(detail::check_ptr(name, p, rows > 0));
  return detail::matrix_span(name, rows, dim, ld, span);
}

// y may be `in` itself (the same ld); any other overlap is an error.
Status check_in_place(const char* y_name, const float* y, int64_t ldy, const char* in_name,
                      const float* in, int64_t ld_in, int64_t rows, int64_t dim) {
  if (in == nullptr || (in == y && ld_in == ldy)) return Status::ok;
  if (detail::partially_overlaps(y, ldy, in, ld_in, rows, dim) || (in == y && ld_in != ldy))
    return fail(Status::invalid_argument, "%s overlaps %s (only the same rows are allowed)", y_name,
                in_name);
  return Status::ok;
}

}  // namespace

namespace detail {

void glu_rows(Activation act, int64_t rows, int64_t dim, const float* gate, int64_t ldg,
              const float* up, int64_t ldu, float* y, int64_t ldy) {
  const arch::ActivationRowFn fn = active_table().norm_act.act[act];
  over_rows(rows, dim,
            [&](int64_t r) { fn(dim, gate + r * ldg, up ? up + r * ldu : nullptr, y + r * ldy); });
}

}  // namespace detail

Status norm(NormKind kind, int64_t rows, int64_t dim, float* x, int64_t ldx, const float* residual,
            int64_t ldr, const float* gain, const float* bias, float eps, float* y, int64_t ldy) {
  return detail::in_arena([&] {
    if (kind != TESSERA_NORM_RMS && kind != TESSERA_NORM_LAYER)
      return fail(Status::invalid_argument,
                  "kind = %d is not TESSERA_NORM_RMS or TESSERA_NORM_LAYER", int(kind));
    TESSERA_CHECK(detail::check_nonneg("rows", rows));
    TESSERA_CHECK(detail::check_positive("dim", dim));
    if (!(std::isfinite(eps) && eps >= 0.0f))
      return fail(Status::invalid_argument, "eps = %g must be finite and >= 0", double(eps));
    int64_t sx = 0, sy = 0, sr = 0;
    TESSERA_CHECK(check_rows("x", "ldx", x, rows, dim, ldx, sx));
    TESSERA_CHECK(check_rows("y", "ldy", y, rows, dim, ldy, sy));
    if (residual) TESSERA_CHECK(check_rows("residual", "ldr", residual, rows, dim, ldr, sr));
    TESSERA_CHECK(check_in_place("y", y, ldy, "x", x, ldx, rows, dim));
    const detail::Region vectors[] = {detail::region("residual", residual, sr, 4),
                                      detail::region("gain", gain, dim, 4),
                                      detail::region("bias", bias, dim, 4)};
    // x and y are both written (the residual's sums, the result)
    TESSERA_CHECK(detail::check_disjoint(detail::region("y", y, sy, 4),
                                         {vectors[0], vectors[1], vectors[2]}));
    TESSERA_CHECK(detail::check_disjoint(detail::region("x", x, sx, 4),
                                         {vectors[0], vectors[1], vectors[2]}));
    if (rows == 0) return Status::ok;
    const arch::NormActKernels& k = detail::active_table().norm_act;
    const arch::NormRowFn fn = kind == TESSERA_NORM_RMS ? k.rms : k.layer;
    over_rows(rows, dim, [&](int64_t r) {
      fn(dim, x + r * ldx, residual ? residual + r * ldr : nullptr, gain, bias, eps, y + r * ldy);
    });
    return Status::ok;
  });
}

Status glu(Activation act, int64_t rows, int64_t dim, const float* gate, int64_t ldg,
           const float* up, int64_t ldu, float* y, int64_t ldy) {
  return detail::in_arena([&] {
    if (act != TESSERA_ACT_SILU && act != TESSERA_ACT_GELU_TANH)
      return fail(Status::invalid_argument,
                  "act = %d is not TESSERA_ACT_SILU or TESSERA_ACT_GELU_TANH", int(act));
    TESSERA_CHECK(detail::check_nonneg("rows", rows));
    TESSERA_CHECK(detail::check_positive("dim", dim));
    int64_t sg = 0, su = 0, sy = 0;
    TESSERA_CHECK(check_rows("gate", "ldg", gate, rows, dim, ldg, sg));
    if (up) TESSERA_CHECK(check_rows("up", "ldu", up, rows, dim, ldu, su));
    TESSERA_CHECK(check_rows("y", "ldy", y, rows, dim, ldy, sy));
    TESSERA_CHECK(check_in_place("y", y, ldy, "gate", gate, ldg, rows, dim));
    TESSERA_CHECK(check_in_place("y", y, ldy, "up", up, ldu, rows, dim));
    detail::glu_rows(act, rows, dim, gate, ldg, up, ldu, y, ldy);
    return Status::ok;
  });
}

}  // namespace tessera
