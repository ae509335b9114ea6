// GEMM with 16-bit operands: C = alpha op(A) op(B) + beta C with A and B each float32, f16 or
// bf16, C float32. Few rows against a 16-bit B^T go to the dot kernels that widen B in
// registers (few_rows). Otherwise a 16-bit operand is widened as it is packed (BLIS packm): the
// product goes in tasks over a grid of C blocks (kRows x kCols), and each task walks k in blocks of
// kDepth, in order, widening its block of op(B) (and of op(A)) into its scratch with the table's
// conversion kernels and multiplying the blocks by a serial float32 plan (beta on the first k
// block, 1 after). Widening costs O(k n) per row block against O(m k n) products. The grid and
// the k blocks follow from the shape alone, so every C element is summed in the same order for
// any thread count. Weights kept in 16 bits are read at half the bytes; the FMAs are float32.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "gemm/gemm_bf16.hpp"
#include "gemm/gemm_check.hpp"
#include "gemm/gemm_driver.hpp"
#include "gemm/gemm_plan.hpp"
#include "gemm/gemm_quant.hpp"
#include "gemm/gemm_split.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/threading.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"
#include "runtime/verbose.hpp"
#include "tessera/gemm.hpp"

namespace tessera {
namespace {

using detail::dtype_bytes;
using detail::gemm_split::line_floats;

// C block and k block: a widened B block is 256 KB and stays in L2 while the serial plan packs
// it; 256 rows of A give every table's tile whole panels.
constexpr int64_t kRows = 256, kCols = 256, kDepth = 256;

// A stored matrix of 16-bit or float32 elements; rows ld elements apart (a float32 operand is
// read in place, never widened).
struct Stored {
  DType type;
  const void* p;
  int64_t ld;
  // Rows [r0, r0 + rows) x columns [c0, c0 + cols) as float32, rows `cols` floats apart.
  void widen(const arch::ConvertKernels& cv, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
             float* out) const {
    const auto* base = static_cast<const char*>(p) + (r0 * ld + c0) * int64_t(dtype_bytes(type));
    for (int64_t r = 0; r < rows; ++r) {
      const char* row = base + r * ld * int64_t(dtype_bytes(type));
      const auto* h = reinterpret_cast<const uint16_t*>(row);
      (type == DType::f16 ? cv.f16_to_f32 : cv.bf16_to_f32)(cols, h, out + r * cols);
    }
  }
};

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  Stored a, b;
  float* c;
  int64_t ldc;
};

// One serial block product: C[i0 + (0..mw), j0 + (0..nw)] (+)= alpha op(A) op(B) over the k
// block [p0, p0 + kw), with op(A) and op(B) where `a_block` / `b_block` say (widened, or the
// caller's float32 rows in place).
detail::GemmProblem block(const Problem& q, int64_t i0, int64_t mw, int64_t j0, int64_t nw,
                          int64_t p0, int64_t kw, const float* a_block, const float* b_block) {
  detail::GemmProblem p;
  p.ta = q.ta, p.tb = q.tb;
  p.m = mw, p.n = nw, p.k = kw;
  p.alpha = q.alpha;
  p.beta = p0 == 0 ? q.beta : 1.0f;
  if (a_block) {
    p.a = a_block, p.lda = q.ta ? mw : kw;
  } else {
    const auto* a = static_cast<const float*>(q.a.p);
    p.a = q.ta ? a + p0 * q.a.ld + i0 : a + i0 * q.a.ld + p0, p.lda = q.a.ld;
  }
  if (b_block) {
    p.b = b_block, p.ldb = q.tb ? kw : nw;
  } else {
    const auto* b = static_cast<const float*>(q.b.p);
    p.b = q.tb ? b + j0 * q.b.ld + p0 : b + p0 * q.b.ld + j0, p.ldb = q.b.ld;
  }
  p.c = q.c + i0 * q.ldc + j0, p.ldc = q.ldc;
  return p;
}

// The floats of a task's scratch: the widened blocks, then the serial plan's own (the largest
// over the block shapes: full and last, in each dimension; the operands' alignment within a
// line is the same for every block, as the block sizes are whole lines).
size_t task_floats(const arch::GemmKernels& kt, const Problem& q, size_t& a_floats,
                   size_t& b_floats) {
  const bool wa = q.a.type != DType::f32, wb = q.b.type != DType::f32;
  a_floats = wa ? line_floats(size_t(std::min(q.m, kRows) * std::min(q.k, kDepth))) : 0;
  b_floats = wb ? line_floats(size_t(std::min(q.n, kCols) * std::min(q.k, kDepth))) : 0;
  size_t plan = 0;
  const detail::Tuning& tn = detail::active_tuning();
  for (int64_t i0 : {int64_t(0), (q.m - 1) / kRows * kRows})
    for (int64_t j0 : {int64_t(0), (q.n - 1) / kCols * kCols})
      for (int64_t p0 : {int64_t(0), (q.k - 1) / kDepth * kDepth}) {
        const int64_t mw = std::min(kRows, q.m - i0), nw = std::min(kCols, q.n - j0);
        const int64_t kw = std::min(kDepth, q.k - p0);
        // Any non-null address of the right line offset stands for the scratch blocks.
        alignas(64) static const float kLine[16] = {};
        const detail::GemmProblem p =
            block(q, i0, mw, j0, nw, p0, kw, wa ? kLine : nullptr, wb ? kLine : nullptr);
        plan =
            std::max(plan, detail::gemm_serial_floats(detail::plan_gemm(kt, tn, p, false, 1), p));
      }
  return a_floats + b_floats + line_floats(plan);
}

// Runs chunk(j0, j1) for the chunks of kCols columns of C, a task each.
template <class Chunk>
void over_column_chunks(int64_t n, const Chunk& chunk) {
  detail::ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, (n + kCols - 1) / kCols, 1),
                      detail::task_body(fj,
                                        [&](const tbb::blocked_range<int64_t>& r) {
                                          for (int64_t ch = r.begin(); ch < r.end(); ++ch)
                                            chunk(ch * kCols, std::min(n, (ch + 1) * kCols));
                                        }),
                      tbb::simple_partitioner());
  });
  fj.join();
}

// Few rows of a float32 A against a 16-bit B: kernels that read B in place and widen it in
// registers. B^T (a Linear layer's weight rows: the decode product) takes the dot kernels in
// tasks over column chunks, each C element one call's. B stored k x n (x W with W in_features x
// out_features) is streamed row by row (rows_stream16) over each thread's share of the whole
// vectors of columns: every row of B read end to end across the share, where strips of columns
// down all of k read a few lines of every 4 KB row and the prefetchers fell behind (1 x 2048 x
// 2048 ran at half the float32 speed that way). The columns past the last whole vector go to
// wide16, all of k in one call. Each C element is one accumulator summing k in order, whatever
// the split, so C is the same for any thread count.
Status few_rows(const arch::KernelTable& t, const Problem& q) {
  const arch::GemmKernels& g = t.gemm;
  const int t16 = q.b.type == DType::bf16 ? 1 : 0;
  const auto* a = static_cast<const float*>(q.a.p);
  const auto* b = static_cast<const uint16_t*>(q.b.p);
  const int64_t lda = q.a.ld, ldb = q.b.ld, ldc = q.ldc;
  if (q.tb) {
    over_column_chunks(q.n, [&](int64_t j0, int64_t j1) {
      for (int64_t i = 0; i < q.m; i += g.dot16_rows) {
        const int64_t rows = std::min<int64_t>(g.dot16_rows, q.m - i), J = g.dot16_cols[rows];
        const float* ai = a + i * lda;
        float* ci = q.c + i * ldc;
        int64_t j = j0;
        for (; j + J <= j1; j += J)
          g.dot16[t16][rows](q.k, ai, lda, b + j * ldb, ldb, ci + j, ldc, q.alpha, q.beta, {});
        for (; j < j1; ++j)
          g.dot16_1[t16][rows](q.k, ai, lda, b + j * ldb, ldb, ci + j, ldc, q.alpha, q.beta, {});
      }
    });
    return Status::ok;
  }
  const int64_t W = g.simd_floats, vectors = q.n / W, wide = g.wide16_cols;
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  const int64_t share = (vectors + threads - 1) / std::max<int64_t>(1, std::min(threads, vectors));
  detail::gemm_split::TaskScratch scratch;  // reserved before any task writes C
  if (!scratch.reserve(line_floats(size_t(q.m * share * W)), true))
    return detail::fail(Status::out_of_memory, "cannot allocate the sums of the streamed columns");
  detail::gemm_split::thread_slices(vectors, true, [&](int64_t v0, int64_t v1, bool tail) {
    scratch.with_slice([&](float* acc) {
      if (v1 > v0)
        g.rows_stream16[t16][q.m](q.k, a, lda, 1, b + v0 * W, ldb, acc, q.c + v0 * W, ldc,
                                  (v1 - v0) * W, q.alpha, q.beta);
      if (tail)
        for (int64_t j = vectors * W; j < q.n; j += wide)
          g.wide16[t16][q.m](q.k, a, lda, 1, arch::B16Rows::matrix(b + j, q.k, ldb), q.c + j, ldc,
                             std::min(wide, q.n - j), q.alpha, q.beta);
    });
  });
  return Status::ok;
}

// A 16-bit A of so few rows is widened whole first (m k floats) and takes the same kernels.
bool takes_few_rows(const arch::KernelTable& t, const Problem& q) {
  return q.k > 0 && q.b.type != DType::f32 && !q.ta &&
         q.m <= (q.tb ? 2 * t.gemm.dot16_rows : arch::kMaxWideRows);
}

Status widened_few_rows(const arch::KernelTable& t, const Problem& q) {
  if (q.a.type == DType::f32) return few_rows(t, q);
  float* a = detail::thread_scratch(detail::ScratchSlot::gemm_a).floats(size_t(q.m * q.k));
  if (a == nullptr) return detail::fail(Status::out_of_memory, "cannot allocate the widened A");
  q.a.widen(t.convert, 0, q.m, 0, q.k, a);
  Problem w = q;
  w.a = {DType::f32, a, q.k};
  return few_rows(t, w);
}

// bf16 x bf16 on the table's bf16 dot-product tile (twice the products of a float32 FMA per
// instruction), where it has one; alpha = 0 keeps the rule that A and B are not read.
bool takes_bf16_dot(const arch::KernelTable& t, const Problem& q) {
  return q.a.type == DType::bf16 && q.b.type == DType::bf16 && t.bf16dot.packed[1] != nullptr &&
         q.k > 0 && q.alpha != 0.0f;
}

detail::Bf16Gemm bf16_problem(const Problem& q) {
  return {q.ta,
          q.tb,
          q.m,
          q.n,
          q.k,
          q.alpha,
          q.beta,
          static_cast<const uint16_t*>(q.a.p),
          static_cast<const uint16_t*>(q.b.p),
          q.a.ld,
          q.b.ld,
          q.c,
          q.ldc};
}

// bf16 x bf16 few rows against B^T on the bf16 dot kernels (no widening at all).
bool takes_bf16_dot_rows(const arch::KernelTable& t, const Problem& q) {
  return takes_bf16_dot(t, q) && detail::bf16_dot_rows_fit(t.bf16dot, bf16_problem(q));
}

Status run(const arch::KernelTable& t, const Problem& q) {
  if (q.m == 0 || q.n == 0) return Status::ok;
  if (takes_bf16_dot_rows(t, q)) return detail::gemm_bf16_dot_rows(t.bf16dot, bf16_problem(q));
  if (takes_few_rows(t, q)) return widened_few_rows(t, q);
  if (takes_bf16_dot(t, q)) return detail::gemm_bf16_dot(t.bf16dot, bf16_problem(q));
  if (q.k == 0) {  // C = beta C: the float32 path's rule (beta = 0 never reads C)
    detail::GemmProblem p = block(q, 0, q.m, 0, q.n, 0, 0, nullptr, nullptr);
    return detail::gemm_run(t.gemm, p);
  }
  size_t a_floats, b_floats;
  const size_t floats = task_floats(t.gemm, q, a_floats, b_floats);
  detail::gemm_split::TaskScratch scratch;
  if (!scratch.reserve(floats, true))
    return detail::fail(Status::out_of_memory, "cannot allocate the widened blocks");
  const int64_t row_blocks = (q.m + kRows - 1) / kRows, col_blocks = (q.n + kCols - 1) / kCols;
  const detail::Tuning& tn = detail::active_tuning();
  detail::TaskStatus status;
  const auto task = [&](int64_t t_index, float* buf) {
    const int64_t i0 = (t_index / col_blocks) * kRows, j0 = (t_index % col_blocks) * kCols;
    const int64_t mw = std::min(kRows, q.m - i0), nw = std::min(kCols, q.n - j0);
    float* a_block = a_floats ? buf : nullptr;
    float* b_block = b_floats ? buf + a_floats : nullptr;
    float* plan_buf = buf + a_floats + b_floats;
    for (int64_t p0 = 0; p0 < q.k; p0 += kDepth) {
      const int64_t kw = std::min(kDepth, q.k - p0);
      if (a_block) {
        if (q.ta)
          q.a.widen(t.convert, p0, kw, i0, mw, a_block);
        else
          q.a.widen(t.convert, i0, mw, p0, kw, a_block);
      }
      if (b_block) {
        if (q.tb)
          q.b.widen(t.convert, j0, nw, p0, kw, b_block);
        else
          q.b.widen(t.convert, p0, kw, j0, nw, b_block);
      }
      const detail::GemmProblem p = block(q, i0, mw, j0, nw, p0, kw, a_block, b_block);
      status.record(detail::gemm_execute(detail::plan_gemm(t.gemm, tn, p, false, 1), p, plan_buf));
    }
  };
  detail::ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, row_blocks * col_blocks, 1),
                      detail::task_body(fj,
                                        [&](const tbb::blocked_range<int64_t>& r) {
                                          scratch.with_slice([&](float* buf) {
                                            for (int64_t i = r.begin(); i < r.end(); ++i)
                                              task(i, buf);
                                          });
                                        }),
                      tbb::simple_partitioner());
  });
  fj.join();
  return status.result();
}

// Weights in a block type: B^T stored n x k (blocks along k) against a float32 A.
Status check_block_b(const arch::KernelTable& t, DType a_type, Transpose tb, int64_t k, int64_t ldb,
                     DType b_type) {
  TESSERA_CHECK(detail::check_block_kernels("b_type", b_type, t));
  if (a_type != DType::f32)
    return detail::fail(Status::invalid_argument,
                        "a_type = %s: a block-type b_type (%s) takes a TESSERA_F32 a",
                        detail::dtype_name(a_type), detail::dtype_name(b_type));
  if (tb != Transpose::trans)
    return detail::fail(Status::invalid_argument,
                        "tb must be TESSERA_TRANS with b_type = %s (B stored n x k, its blocks "
                        "along k)",
                        detail::dtype_name(b_type));
  TESSERA_CHECK(detail::check_blocks("k", k, b_type));
  return detail::check_blocks("ldb", ldb, b_type);
}

Status run_block_b(const arch::KernelTable& t, Transpose ta, int64_t m, int64_t n, int64_t k,
                   float alpha, const void* a, int64_t lda, DType b_type, const void* b,
                   int64_t ldb, float beta, float* c, int64_t ldc) {
  const detail::QuantGemm q{ta == Transpose::trans,
                            m,
                            n,
                            k,
                            alpha,
                            beta,
                            static_cast<const float*>(a),
                            lda,
                            b_type,
                            static_cast<const uint8_t*>(b),
                            ldb,
                            c,
                            ldc};
  const detail::Verbose vb;
  const Status st = detail::gemm_quant(t, q);
  if (vb.on()) {
    const detail::QuantGemmPlan p = detail::plan_quant_gemm(t, detail::active_tuning(), q);
    char names[96];
    const int r = int(std::min<int64_t>(
        p.gemv ? t.quant.gemv_rows[detail::block_index(b_type)] : t.quant.dot_rows, p.rows));
    const char* dot = t.quant.dot_name ? t.quant.dot_name : "none";
    if (p.packed)
      std::snprintf(names, sizeof names, "q8_0_rows_from_f32_%s+%s_gemm_%s_%dx%d_%s", t.name,
                    detail::dtype_name(b_type), t.quant.gemm_name, t.quant.gemm_mr, t.quant.gemm_nr,
                    t.name);
    else
      std::snprintf(names, sizeof names, "q8_0_rows_from_f32_%s+%s_%s_%s_%dx%d_%s", t.name,
                    detail::dtype_name(b_type), p.gemv ? "gemv" : "dot", dot, r, p.gemv ? 1 : 2,
                    t.name);
    vb.print("gemm_ex", st,
             p.packed     ? "int8-gemm-packed-b"
             : p.gemv     ? "int8-gemv-rows"
             : p.few_rows ? "few-rows-int8-dot"
                          : "int8-dot-blocks",
             names, p.parallel ? tbb::this_task_arena::max_concurrency() : 1,
             "m:%lld n:%lld k:%lld ta:%c tb:T task:%lldx%lld", (long long)m, (long long)n,
             (long long)k, ta == Transpose::trans ? 'T' : 'N', (long long)p.rows,
             (long long)p.cols);
  }
  return st;
}

}  // namespace

Status gemm_ex(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
               DType a_type, const void* a, int64_t lda, DType b_type, const void* b, int64_t ldb,
               float beta, float* c, int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_dtype("a_type", a_type));
    TESSERA_CHECK(detail::check_storage_type("b_type", b_type));
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_transpose("ta", ta));
    TESSERA_CHECK(detail::check_ld("lda", lda, ta == Transpose::no_trans ? k : m));
    TESSERA_CHECK(detail::check_ptr("a", a, m > 0 && k > 0));
    TESSERA_CHECK(detail::check_transpose("tb", tb));
    TESSERA_CHECK(detail::check_ld("ldb", ldb, tb == Transpose::no_trans ? n : k));
    TESSERA_CHECK(detail::check_ptr("b", b, k > 0 && n > 0));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    const arch::KernelTable& t = detail::active_table();
    if (detail::is_block(b_type)) TESSERA_CHECK(check_block_b(t, a_type, tb, k, ldb, b_type));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, s));
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("c", c, s.c, 4),
                               {detail::region("a", a, s.a, dtype_bytes(a_type)),
                                detail::region("b", b, detail::storage_bytes(b_type, s.b), 1)}));
    if (a_type == DType::f32 && b_type == DType::f32)
      return sgemm(ta, tb, m, n, k, alpha, static_cast<const float*>(a), lda,
                   static_cast<const float*>(b), ldb, beta, c, ldc);
    if (detail::is_block(b_type))
      return run_block_b(t, ta, m, n, k, alpha, a, lda, b_type, b, ldb, beta, c, ldc);
    const Problem q{ta == Transpose::trans, tb == Transpose::trans, m, n,  k, alpha, beta,
                    {a_type, a, lda},       {b_type, b, ldb},       c, ldc};
    const detail::Verbose vb;
    const Status st = run(t, q);
    if (vb.on()) {
      char names[64];
      const bool rows2 = takes_bf16_dot_rows(t, q), few = !rows2 && takes_few_rows(t, q);
      const bool dot2 = !rows2 && !few && takes_bf16_dot(t, q);
      if (rows2)
        std::snprintf(names, sizeof names, "bf16_gemm_dot2_nt_%dx%d_%s", t.bf16dot.dot_rows,
                      t.bf16dot.dot_cols[t.bf16dot.dot_rows], t.name);
      else if (dot2)
        std::snprintf(names, sizeof names, "bf16_gemm_dot2_packed_%dx%d_mr%d_%s", t.bf16dot.mr,
                      t.bf16dot.nr, t.bf16dot.mr, t.name);
      else
        std::snprintf(names, sizeof names, "%s_%s_f32_gemm_widened_%s", detail::dtype_name(a_type),
                      detail::dtype_name(b_type), t.name);
      vb.print("gemm_ex", st,
               rows2  ? "few-rows-bf16-dot"
               : few  ? "few-rows-dot-b16"
               : dot2 ? "bf16-dot-pairs"
                      : "widen-blocks",
               names, tbb::this_task_arena::max_concurrency(), "m:%lld n:%lld k:%lld ta:%c tb:%c",
               (long long)m, (long long)n, (long long)k, ta == Transpose::trans ? 'T' : 'N',
               tb == Transpose::trans ? 'T' : 'N');
    }
    return st;
  });
}

}  // namespace tessera
