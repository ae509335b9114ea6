// Softmax-family driver: argument checks, the choice of row kernel, the special rows, and the
// TBB partition (rows in parallel; rows of 2^16 or more columns split into fixed chunks whose
// (max, sum) are merged in chunk order, so results do not depend on the thread count).
#include "tessera/softmax.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <limits>
#include <vector>

#include "check.hpp"
#include "dispatch.hpp"

namespace tessera {
namespace {

using arch::SoftmaxKernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows up to this many columns (64 KB) stay in L1/L2 between passes, where the exp-store
// variant (one exp per element, x read once from memory) beats the online pass (1.25 + 1 exps
// per element). Measured on AVX-512: see the closing note of issue 4 / bench softmax rows.
constexpr int64_t kCachedCols = 16384;
// Rows from this many columns are split into chunks of kChunk, merged in chunk order.
constexpr int64_t kSplitCols = 65536;
constexpr int64_t kChunk = 16384;

enum class Op { softmax, log_softmax, logsumexp };

using Stats = OnlineSoftmaxState;

// A row the arithmetic path cannot finish: NaN somewhere, a +inf, or no mass at all. Writes
// what the reference defines (src/reference/softmax.cpp) and returns the row's lse.
float special_row(Op op, int64_t cols, const float* x, float scale, float* y) {
  bool nan = false;
  int64_t inf_count = 0;
  for (int64_t j = 0; j < cols; ++j) {
    const float v = x[j] * scale;
    nan |= std::isnan(v);
    inf_count += v == kInf;
  }
  float lse;
  if (nan) {
    lse = kNaN;
    if (y)
      for (int64_t j = 0; j < cols; ++j) y[j] = kNaN;
  } else if (inf_count > 0) {
    lse = kInf;
    if (y) {
      const float share = op == Op::softmax ? 1.0f / float(inf_count) : -std::log(float(inf_count));
      const float rest = op == Op::softmax ? 0.0f : -kInf;
      for (int64_t j = 0; j < cols; ++j) y[j] = x[j] * scale == kInf ? share : rest;
    }
  } else {  // every entry -inf (or no entries)
    lse = -kInf;
    if (y)
      for (int64_t j = 0; j < cols; ++j) y[j] = op == Op::softmax ? 0.0f : -kInf;
  }
  return lse;
}

bool arithmetic(Stats s) { return std::isfinite(s.max) && std::isfinite(s.sum) && s.sum > 0; }

// One row of up to kSplitCols columns, by one thread. Returns the row's lse only when asked
// (lse_wanted), as plain softmax has no use for the log.
float short_row(const SoftmaxKernels& k, Op op, int64_t cols, const float* x, float scale, float* y,
                bool lse_wanted) {
  Stats st;
  if (op == Op::softmax && cols <= kCachedCols) {
    k.softmax_cached(cols, x, scale, y, &st.max, &st.sum);
    if (!arithmetic(st)) return special_row(op, cols, x, scale, y);
    return lse_wanted ? st.max + std::log(st.sum) : 0.0f;
  }
  if (cols <= kCachedCols)
    k.stats_cached(cols, x, scale, &st.max, &st.sum);
  else
    k.stats_online(cols, x, scale, &st.max, &st.sum);
  if (!arithmetic(st)) return special_row(op, cols, x, scale, y);
  const float lse = st.max + std::log(st.sum);
  if (op == Op::softmax) k.exp_scale(cols, x, scale, st.max, 1.0f / st.sum, y);
  if (op == Op::log_softmax) k.affine(cols, x, scale, -lse, y);
  return lse;
}

// A long row: fixed chunks in parallel for the statistics and for the output pass.
float long_row(const SoftmaxKernels& k, Op op, int64_t cols, const float* x, float scale,
               float* y) {
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  std::vector<Stats> part(static_cast<size_t>(chunks));
  tbb::parallel_for(int64_t(0), chunks, [&](int64_t c) {
    const int64_t j = c * kChunk, len = std::min(kChunk, cols - j);
    Stats& s = part[size_t(c)];
    k.stats_cached(len, x + j, scale, &s.max, &s.sum);  // a chunk (64 KB) stays in L2
    if (s.max == -kInf) s.sum = 0.0f;                   // no mass: mergeable
  });
  Stats st = part[0];
  for (int64_t c = 1; c < chunks; ++c) st.merge(part[size_t(c)]);
  if (!arithmetic(st)) return special_row(op, cols, x, scale, y);
  const float lse = st.max + std::log(st.sum);
  if (op == Op::logsumexp) return lse;
  tbb::parallel_for(int64_t(0), chunks, [&](int64_t c) {
    const int64_t j = c * kChunk, len = std::min(kChunk, cols - j);
    if (op == Op::softmax)
      k.exp_scale(len, x + j, scale, st.max, 1.0f / st.sum, y + j);
    else
      k.affine(len, x + j, scale, -lse, y + j);
  });
  return lse;
}

void run_rows(Op op, int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
              float scale, float* lse_out) {
  const SoftmaxKernels& k = detail::active_table().softmax;
  auto row = [&](int64_t r) {
    float* yr = y ? y + r * ldy : nullptr;
    const float lse = cols >= kSplitCols
                          ? long_row(k, op, cols, x + r * ldx, scale, yr)
                          : short_row(k, op, cols, x + r * ldx, scale, yr, lse_out != nullptr);
    if (lse_out) lse_out[r] = lse;
  };
  // About 32K elements per task: enough to amortise scheduling, fine enough to balance. A
  // problem of one task runs here, without TBB (its fork-join costs more than 8 rows of 128).
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1));
  if (rows <= grain && cols < kSplitCols) {
    for (int64_t r = 0; r < rows; ++r) row(r);
    return;
  }
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        for (int64_t i = r.begin(); i < r.end(); ++i) row(i);
                      });
  });
}

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
  run_rows(Op::softmax, rows, cols, x, ldx, y, ldy, scale, nullptr);
  return Status::ok;
}

Status log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                   float scale) {
  TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
  TESSERA_CHECK(check_output(rows, cols, x, ldx, y, ldy));
  if (rows == 0 || cols == 0) return Status::ok;
  run_rows(Op::log_softmax, rows, cols, x, ldx, y, ldy, scale, nullptr);
  return Status::ok;
}

Status logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale, float* out) {
  TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
  TESSERA_CHECK(detail::check_ptr("out", out, rows > 0));
  if (rows == 0) return Status::ok;
  if (cols == 0) {
    for (int64_t r = 0; r < rows; ++r) out[r] = -kInf;  // the empty sum
    return Status::ok;
  }
  run_rows(Op::logsumexp, rows, cols, x, ldx, nullptr, 0, scale, out);
  return Status::ok;
}

}  // namespace tessera
