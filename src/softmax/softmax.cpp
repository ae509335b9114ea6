// Softmax-family driver: argument checks, the choice of row kernel, the special rows, and the
// TBB partition (rows in parallel; rows of more than 16K columns split into fixed chunks whose
// (max, sum) are merged in chunk order, so results do not depend on the thread count).
#include "tessera/softmax.hpp"
#include "runtime/threading.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"
#include "runtime/verbose.hpp"

namespace tessera {
namespace {

using arch::SoftmaxKernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows up to the tuning row's softmax_cached_cols stay in L1/L2 between passes and are done
// whole: softmax by a max pass, an exp pass (one exp per element, stored) and a normalising
// pass; the statistics (logsumexp, log-softmax) by the one-read stream kernel, rows of up to
// 256 columns in groups by two passes. Longer rows go by chunks of kChunk columns
// (chunked_row).
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

// scale = 0: every finite entry scores 0, so a row is uniform; an infinite or NaN entry makes
// 0 x inf = NaN, a NaN row (the reference's definition). The kernels divide by the scale.
float zero_scale_row(Op op, int64_t cols, const float* x, float* y) {
  bool finite = true;
  for (int64_t j = 0; j < cols; ++j) finite &= std::isfinite(x[j]);
  const float lse = finite ? std::log(float(cols)) : kNaN;
  if (y) {
    const float v = !finite ? kNaN : op == Op::softmax ? 1.0f / float(cols) : -lse;
    for (int64_t j = 0; j < cols; ++j) y[j] = v;
  }
  return lse;
}

bool arithmetic(Stats s) { return std::isfinite(s.max) && std::isfinite(s.sum) && s.sum > 0; }

// Softmax of rows [r0, r1) that stay in cache: the multi-row kernel in blocks, then the rows it
// could not finish rewritten as special rows, and lse where asked. buf: 2 x cols floats for the
// kernel's streaming stores (null: plain stores).
void cached_softmax_rows(const SoftmaxKernels& k, int64_t r0, int64_t r1, int64_t cols,
                         const float* x, int64_t ldx, float scale, float* y, int64_t ldy,
                         float* lse_out, float* buf) {
  constexpr int64_t kBlockRows = 64;
  float mx[kBlockRows], sum[kBlockRows];
  for (int64_t r = r0; r < r1; r += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, r1 - r);
    k.softmax_rows_cached(rows, cols, x + r * ldx, ldx, scale, y + r * ldy, ldy, mx, sum, buf);
    for (int64_t i = 0; i < rows; ++i) {
      const Stats st{mx[i], sum[i]};
      float lse;
      if (arithmetic(st))
        lse = lse_out ? st.max + std::log(st.sum) : 0.0f;
      else
        lse = special_row(Op::softmax, cols, x + (r + i) * ldx, scale, y + (r + i) * ldy);
      if (lse_out) lse_out[r + i] = lse;
    }
  }
}

// Log-softmax or logsumexp of rows [r0, r1) of cached columns: the statistics of a
// block of rows in one kernel call (short rows go in groups there), then per row its lse and,
// for log-softmax, y = scale x - lse while the block is still in cache (64 KB blocks).
void cached_stats_rows(const SoftmaxKernels& k, Op op, int64_t r0, int64_t r1, int64_t cols,
                       const float* x, int64_t ldx, float scale, float* y, int64_t ldy,
                       float* lse_out) {
  constexpr int64_t kBlockRows = 64;
  const int64_t block = op == Op::logsumexp
                            ? kBlockRows
                            : std::clamp<int64_t>((64 << 10) / (cols * 4), 1, kBlockRows);
  float mx[kBlockRows], sum[kBlockRows];
  for (int64_t r = r0; r < r1; r += block) {
    const int64_t rows = std::min(block, r1 - r);
    k.stats_rows(rows, cols, x + r * ldx, ldx, scale, mx, sum);
    for (int64_t i = 0; i < rows; ++i) {
      const Stats st{mx[i], sum[i]};
      const float* xr = x + (r + i) * ldx;
      float* yr = y ? y + (r + i) * ldy : nullptr;
      float lse;
      if (arithmetic(st)) {
        lse = st.max + std::log(st.sum);
        if (op == Op::log_softmax) k.affine(cols, xr, scale, -lse, yr);
      } else {
        lse = special_row(op, cols, xr, scale, yr);
      }
      if (lse_out) lse_out[r + i] = lse;
    }
  }
}

// A row of more than the cached columns, in fixed chunks of kChunk columns (64 KB: a chunk read
// from memory by the max pass is still in L2 for the exp pass) whose (max, sum) merge in chunk
// order, so results do not depend on how the chunks are scheduled. Softmax stores each chunk's
// exps relative to the chunk's own max in the first pass; the second pass only rescales them by
// exp(m_c - M) / S. That is one exp per element and x read once from memory, against two exps
// (statistics, then exp again for the output) or 2.25 (online statistics) otherwise. Log-softmax
// and logsumexp need only the statistics: the online pass.
// `part` holds a Stats per chunk.
float chunked_row(const SoftmaxKernels& k, Op op, int64_t cols, const float* x, float scale,
                  float* y, bool parallel, Stats* part) {
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  auto each_chunk = [&](auto&& f) {
    auto body = [&](int64_t c) { f(c * kChunk, std::min(kChunk, cols - c * kChunk), c); };
    if (parallel) {
      detail::ForkJoin fj;
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, chunks),
                        detail::task_body(fj, [&](const tbb::blocked_range<int64_t>& r) {
                          for (int64_t c = r.begin(); c < r.end(); ++c) body(c);
                        }));
      fj.join();
    } else
      for (int64_t c = 0; c < chunks; ++c) body(c);
  };
  each_chunk([&](int64_t j, int64_t len, int64_t c) {
    Stats& s = part[size_t(c)];
    if (op != Op::softmax) {
      // Statistics only: the one-read stream kernel.
      k.stats_stream(len, x + j, scale, &s.max, &s.sum);
      if (s.max == -kInf) s.sum = 0.0f;  // no mass: mergeable
      return;
    }
    s.max = k.max(len, x + j) * scale;
    if (s.max > -kInf && s.max < kInf)
      s.sum = k.exp_sum(len, x + j, scale, s.max, y + j);
    else
      s.sum = s.max == -kInf ? 0.0f : kNaN;  // no mass (mergeable), or a special row
  });
  Stats st = part[0];
  for (int64_t c = 1; c < chunks; ++c) st.merge(part[size_t(c)]);
  // In place, a special row's x may already hold exps: NaN stays NaN under exp, +inf entries
  // sit in chunks that were not written, and the exps of finite entries get 0 either way.
  if (!arithmetic(st)) return special_row(op, cols, x, scale, y);
  const float lse = st.max + std::log(st.sum);
  if (op == Op::logsumexp) return lse;
  each_chunk([&](int64_t j, int64_t len, int64_t c) {
    const float m_c = part[size_t(c)].max;
    if (op == Op::log_softmax)
      k.affine(len, x + j, scale, -lse, y + j);
    else if (m_c == -kInf)  // no mass in this chunk, and nothing was stored
      std::fill(y + j, y + j + len, 0.0f);
    else
      k.affine(len, y + j, std::exp(m_c - st.max) / st.sum, 0.0f, y + j);
  });
  return lse;
}

Status run_rows(Op op, int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y,
                int64_t ldy, float scale, float* lse_out) {
  const SoftmaxKernels& k = detail::active_table().softmax;
  const int threads = tbb::this_task_arena::max_concurrency();
  // Long rows: each thread's chunk statistics, in one block of the calling thread's scratch
  // taken before anything is written (a slice per task running at once).
  const size_t chunks = size_t((cols + kChunk - 1) / kChunk);
  detail::Slices parts;
  const int64_t cached_cols = detail::active_tuning().softmax_cached_cols;
  const bool chunked = cols > cached_cols;
  if (chunked && !parts.reserve(detail::thread_scratch(detail::ScratchSlot::softmax_parts),
                                2 * chunks, detail::slices_for_arena()))
    return detail::fail(Status::out_of_memory, "cannot allocate %zu chunk statistics", chunks);
  static_assert(sizeof(Stats) == 2 * sizeof(float), "Stats is two floats");
  // A negative scale (softmin, as ggml's soft_max_ext takes): the kernels take the row max as
  // the scaled max, so they run on -x with -scale. Softmax and log-softmax negate each row into
  // y (their output; in place is the same), logsumexp into a row of scratch per thread.
  const bool negate = scale < 0.0f;
  detail::Slices neg;
  if (negate && !y &&
      !neg.reserve(detail::thread_scratch(detail::ScratchSlot::softmax_negated), size_t(cols),
                   detail::slices_for_arena()))
    return detail::fail(Status::out_of_memory, "cannot allocate %zu floats of scratch",
                        size_t(cols));
  // Long rows: whole rows per task when there are enough of them (a row's chunks then stay in
  // this core's L2 for the second pass), otherwise the chunks of each row in parallel.
  const bool chunks_parallel = chunked && rows < 2 * int64_t(threads);
  // Outputs past the caches are written with streaming stores (no read of y's lines first).
  // Streaming rows go through a buffer of 2 x cols per task, taken here; without it (out of
  // memory) they take the plain stores, with the same results.
  const bool stream =
      double(rows) * double(cols) * sizeof(float) >= detail::active_tuning().softmax_stream_bytes;
  detail::Slices stream_bufs;
  const bool stream_rows = stream && op == Op::softmax && !chunked &&
                           stream_bufs.reserve(detail::thread_scratch(detail::ScratchSlot::softmax),
                                               size_t(2 * cols), detail::slices_for_arena());
  // Rows [r, end) of one task.
  auto plain_rows = [&](int64_t r, int64_t end, const float* xs, int64_t ldxs, float sc,
                        float* lse) {
    if (!chunked) {
      if (op == Op::softmax && stream_rows) {
        const detail::Slices::Lease buf(stream_bufs);
        cached_softmax_rows(k, r, end, cols, xs, ldxs, sc, y, ldy, lse, buf.get());
      } else if (op == Op::softmax) {
        cached_softmax_rows(k, r, end, cols, xs, ldxs, sc, y, ldy, lse, nullptr);
      } else
        cached_stats_rows(k, op, r, end, cols, xs, ldxs, sc, y, ldy, lse);
      return;
    }
    const detail::Slices::Lease slice(parts);
    // cppcheck-suppress invalidPointerCast
    Stats* part = reinterpret_cast<Stats*>(slice.get());
    for (; r < end; ++r) {
      const float row_lse = chunked_row(k, op, cols, xs + r * ldxs, sc, y ? y + r * ldy : nullptr,
                                        chunks_parallel, part);
      if (lse) lse[r] = row_lse;
    }
  };
  auto rows_of_task = [&](int64_t r, int64_t end) {
    if (scale == 0.0f) {
      for (int64_t i = r; i < end; ++i) {
        const float lse = zero_scale_row(op, cols, x + i * ldx, y ? y + i * ldy : nullptr);
        if (lse_out) lse_out[i] = lse;
      }
      return;
    }
    if (!negate) return plain_rows(r, end, x, ldx, scale, lse_out);
    if (y) {
      for (int64_t i = r; i < end; ++i) k.affine(cols, x + i * ldx, -1.0f, 0.0f, y + i * ldy);
      return plain_rows(r, end, y, ldy, -scale, lse_out);
    }
    const detail::Slices::Lease slice(neg);
    float* row = slice.get();
    for (int64_t i = r; i < end; ++i) {
      k.affine(cols, x + i * ldx, -1.0f, 0.0f, row);
      plain_rows(0, 1, row, cols, -scale, lse_out ? lse_out + i : nullptr);  // as a one-row problem
    }
  };
  // About 32K elements per task: enough to amortise scheduling, fine enough to balance. A
  // problem of one task runs here, without TBB (its fork-join costs more than 8 rows of 128).
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1));
  if (chunks_parallel) {
    tbb::this_task_arena::isolate([&] { rows_of_task(0, rows); });
    return Status::ok;
  }
  if (rows <= grain) {
    rows_of_task(0, rows);
    return Status::ok;
  }
  detail::ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain),
                      detail::task_body(fj, [&](const tbb::blocked_range<int64_t>& r) {
                        rows_of_task(r.begin(), r.end());
                      }));
  });
  fj.join();
  return Status::ok;
}

Status check_rows(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale) {
  TESSERA_CHECK(detail::check_nonneg("rows", rows));
  TESSERA_CHECK(detail::check_nonneg("cols", cols));
  TESSERA_CHECK(detail::check_ld("ldx", ldx, cols));
  TESSERA_CHECK(detail::check_ptr("x", x, rows > 0 && cols > 0));
  int64_t span;
  TESSERA_CHECK(detail::matrix_span("x", rows, cols, ldx, span));
  if (!std::isfinite(scale))
    return detail::fail(Status::invalid_argument, "scale = %g must be finite", scale);
  return Status::ok;
}

Status check_output(int64_t rows, int64_t cols, const float* x, int64_t ldx, const float* y,
                    int64_t ldy) {
  TESSERA_CHECK(detail::check_ld("ldy", ldy, cols));
  TESSERA_CHECK(detail::check_ptr("y", y, rows > 0 && cols > 0));
  int64_t span;
  TESSERA_CHECK(detail::matrix_span("y", rows, cols, ldy, span));
  if (detail::partially_overlaps(x, ldx, y, ldy, rows, cols))
    return detail::fail(Status::invalid_argument,
                        "y overlaps x without being the same matrix (in place needs y == x, "
                        "ldy == ldx)");
  return Status::ok;
}

// run_rows with the TESSERA_VERBOSE line.
Status run_logged(const char* name, Op op, int64_t rows, int64_t cols, const float* x, int64_t ldx,
                  float* y, int64_t ldy, float scale, float* lse) {
  const detail::Verbose vb;
  const Status st = run_rows(op, rows, cols, x, ldx, y, ldy, scale, lse);
  if (vb.on()) {
    char kernels[64];
    std::snprintf(kernels, sizeof kernels, "f32_softmax_online_%s", detail::active_table().name);
    const bool stream = y && double(rows) * double(cols) * sizeof(float) >=
                                 detail::active_tuning().softmax_stream_bytes;
    const char* rule = cols > detail::active_tuning().softmax_cached_cols
                           ? (stream ? "rows-by-chunks-streamed" : "rows-by-chunks")
                           : (stream ? "rows-in-cache-streamed" : "rows-in-cache");
    vb.print(name, st, rule, kernels, tbb::this_task_arena::max_concurrency(),
             "rows:%lld cols:%lld ldx:%lld scale:%g", (long long)rows, (long long)cols,
             (long long)ldx, double(scale));
  }
  return st;
}

}  // namespace

Status softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
               float scale) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
    TESSERA_CHECK(check_output(rows, cols, x, ldx, y, ldy));
    if (rows == 0 || cols == 0) return Status::ok;
    return run_logged("softmax", Op::softmax, rows, cols, x, ldx, y, ldy, scale, nullptr);
  });
}

Status log_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                   float scale) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
    TESSERA_CHECK(check_output(rows, cols, x, ldx, y, ldy));
    if (rows == 0 || cols == 0) return Status::ok;
    return run_logged("log_softmax", Op::log_softmax, rows, cols, x, ldx, y, ldy, scale, nullptr);
  });
}

Status logsumexp(int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale, float* out) {
  return detail::in_arena([&] {
    TESSERA_CHECK(check_rows(rows, cols, x, ldx, scale));
    TESSERA_CHECK(detail::check_ptr("out", out, rows > 0));
    int64_t x_span;
    TESSERA_CHECK(detail::matrix_span("x", rows, cols, ldx, x_span));
    TESSERA_CHECK(detail::check_disjoint(detail::region("out", out, rows, sizeof(float)),
                                         {detail::region("x", x, x_span, sizeof(float))}));
    if (rows == 0) return Status::ok;
    if (cols == 0) {
      for (int64_t r = 0; r < rows; ++r) out[r] = -kInf;  // the empty sum
      return Status::ok;
    }
    return run_logged("logsumexp", Op::logsumexp, rows, cols, x, ldx, nullptr, 0, scale, out);
  });
}

}  // namespace tessera
