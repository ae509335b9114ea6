// SGEMM driver: argument checks, then the kernels of the active table.
#include "tessera/gemm.hpp"
#include "runtime/threading.hpp"

#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>

#include "arch/common/prefetch.hpp"
#include "gemm/gemm_check.hpp"
#include "gemm/gemm_plan.hpp"
#include "gemm/gemm_split.hpp"
#include "runtime/check.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/tsan.hpp"
#include "runtime/tuning.hpp"
#include "runtime/verbose.hpp"

namespace tessera {
namespace {

detail::GemmProblem problem(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc) {
  detail::GemmProblem p;
  p.ta = ta == Transpose::trans;
  p.tb = tb == Transpose::trans;
  p.m = m, p.n = n, p.k = k;
  p.alpha = alpha, p.beta = beta;
  p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
  return p;
}

char trans_char(bool t) { return t ? 'T' : 'N'; }

// Asks for the lines of a rows x cols block (rows ld floats apart) to be brought into L2, one
// request per 128-byte pair of lines (the L2's spatial prefetcher fetches the other line; a
// request per line made the 64^3 x 256 batch 3% slower on 1 and 2 threads).
__attribute__((always_inline)) inline void prefetch_block(const float* p, int64_t rows,
                                                          int64_t cols, int64_t ld) {
  if (cols <= 0) return;  // an empty B may have any leading dimension: r * ld could overflow
  for (int64_t r = 0; r < rows; ++r) arch::prefetch_span<2, 32>(p + r * ld, cols);
}

// Items in turn, each parallel over its own blocks. Atomic on a failure to allocate: every item
// has the first one's plan and scratch (the same shape on the same thread), so if the first
// reserved its scratch, the others find it there.
template <class Item>
Status run_in_turn(const arch::GemmKernels& kt, int64_t batch, const Item& item) {
  for (int64_t i = 0; i < batch; ++i) TESSERA_CHECK(detail::gemm_run(kt, item(i)));
  return Status::ok;
}

// One item per task, parallel over the batch.
template <class Item>
Status run_per_task(const arch::GemmKernels& kt, int64_t batch, const Item& item) {
  const detail::GemmProblem first = item(0);
  const int64_t m = first.m, n = first.n, k = first.k, ldb = first.ldb;
  const float* b = first.b;
  const int64_t stride_b = batch > 1 ? item(1).b - b : 0;
  // Each thread takes one contiguous run of items (they are the same size), and while it
  // multiplies one it asks for the next one's B: a small item's operands come from L3 (the
  // 64^3 x 256 batch is 12 MB), and fetched on demand by the packing of B^T, which starts the
  // item, their misses were not hidden by any FMAs. 64^3 x 256 with B^T, 1 thread, 10
  // alternated runs, medians: 132.7 -> 167.4 GFLOP/s and 147.9 -> 169.2. The kernels read A
  // front to back, which the hardware prefetcher follows: asking for it as well was 2% slower
  // (1 thread, two sets of 8 alternated runs: 209.3 against 213.1, 210.9 against 214.6; 2
  // threads the same). So was the next C, and spreading the requests over the item's
  // micro-kernel calls rather than issuing them before its packing (3%). Packing the next
  // item's B^T itself in pieces between this item's micro-kernel calls, into a second buffer,
  // so that its shuffles ran beside the FMAs, was 4% slower on 1 and 2 threads (212.4 against
  // 203.3): two packed B, A and C are 64 KB, more than L1.
  const bool prefetch_next = 4.0 * (double(m) * double(k) + double(k) * double(n)) <=
                             detail::active_tuning().prefetch_next_item_bytes;
  const bool b_rows = !first.tb;
  // Every task's scratch, reserved here before any item writes C: a slice per task running at
  // once, as large as any item's plan needs. Plans can differ only by the operands' alignment,
  // and every pointer's offset within a 64-byte line repeats every 16 items.
  const detail::Tuning& tn = detail::active_tuning();
  size_t floats = 0;
  for (int64_t i = 0; i < std::min<int64_t>(batch, 16); ++i)
    floats = std::max(
        floats, detail::gemm_serial_floats(detail::plan_gemm(kt, tn, item(i), false, 1), item(i)));
  detail::gemm_split::TaskScratch scratch;
  if (!scratch.reserve(floats, true))
    return detail::fail(Status::out_of_memory, "cannot allocate the scratch of the batch's tasks");
  detail::TaskStatus status;
  const auto items = [&](int64_t i0, int64_t i1, float* buf) {
    for (int64_t i = i0; i < i1; ++i) {
      if (prefetch_next && i + 1 < i1)
        prefetch_block(b + (i + 1) * stride_b, b_rows ? k : n, b_rows ? n : k, ldb);
      const detail::GemmProblem p = item(i);
      status.record(detail::gemm_execute(detail::plan_gemm(kt, tn, p, false, 1), p, buf));
    }
  };
  detail::ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, batch),
        detail::task_body(fj,
                          [&](const tbb::blocked_range<int64_t>& r) {
                            scratch.with_slice([&](float* buf) { items(r.begin(), r.end(), buf); });
                          }),
        tbb::static_partitioner());
  });
  fj.join();
  return status.result();
}

}  // namespace

Status sgemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    detail::GemmSpans s;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, s));
    TESSERA_CHECK(
        detail::check_disjoint(detail::region("c", c, s.c, 4),
                               {detail::region("a", a, s.a, 4), detail::region("b", b, s.b, 4)}));
    return detail::gemm_run_product("sgemm", detail::active_table(),
                                    problem(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  });
}

Status sgemm_strided_batched(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float* a, int64_t lda, int64_t stride_a,
                             const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                             int64_t ldc, int64_t stride_c, int64_t batch) {
  return detail::in_arena([&] {
    TESSERA_CHECK(detail::check_gemm_sizes(m, n, k));
    TESSERA_CHECK(detail::check_nonneg("batch", batch));
    TESSERA_CHECK(detail::check_gemm_a(ta, m, k, a, lda));
    TESSERA_CHECK(detail::check_gemm_b(tb, k, n, b, ldb));
    TESSERA_CHECK(detail::check_gemm_c(m, n, c, ldc));
    TESSERA_CHECK(detail::check_nonneg("stride_a", stride_a));
    TESSERA_CHECK(detail::check_nonneg("stride_b", stride_b));
    detail::GemmSpans one;
    TESSERA_CHECK(detail::gemm_spans(ta, tb, m, n, k, lda, ldb, ldc, one));
    if (batch > 1 && one.c > 0 && stride_c < one.c) {
      return detail::fail(Status::invalid_argument,
                          "stride_c = %lld makes the C matrices overlap (needs >= %lld)",
                          static_cast<long long>(stride_c), static_cast<long long>(one.c));
    }
    // The whole batch of each operand: (batch - 1) strides past the span of one matrix.
    auto whole = [&](const char* name, int64_t stride, int64_t span, int64_t& out) {
      const int64_t strides[2] = {stride, 1}, extents[2] = {span > 0 ? batch : 0, span};
      return detail::tensor_span(name, strides, extents, 2, sizeof(float), out);
    };
    detail::GemmSpans all;
    TESSERA_CHECK(whole("a", stride_a, one.a, all.a));
    TESSERA_CHECK(whole("b", stride_b, one.b, all.b));
    TESSERA_CHECK(whole("c", stride_c, one.c, all.c));
    TESSERA_CHECK(detail::check_disjoint(
        detail::region("c", c, all.c, 4),
        {detail::region("a", a, all.a, 4), detail::region("b", b, all.b, 4)}));
    if (m == 0 || n == 0 || batch == 0) return Status::ok;
    const arch::KernelTable& table = detail::active_table();
    const arch::GemmKernels& kt = table.gemm;
    auto item = [&](int64_t i) {
      return problem(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                     c + i * stride_c, ldc);
    };
    // Problems too small to keep every thread busy on their own (attention's per-head products)
    // run one per task, parallel over the batch; so do larger ones when the batch divides among
    // the threads with at least 90% of them busy (512^3 x 8 on 2 threads: 177 GFLOP/s one after
    // another, each parallel over its blocks with two fork-joins per KC block, against ~2x the
    // 1-thread 133 one per task). Otherwise they run one after another, each parallel over its
    // own blocks. Either way each C matrix is summed in the same order.
    const int64_t threads = tbb::this_task_arena::max_concurrency();
    const int64_t rounds = (batch + threads - 1) / threads;
    const bool per_task =
        double(m) * n * k <= 256.0 * 256 * 256 || double(batch) >= 0.9 * double(rounds * threads);
    const bool one_by_one = batch == 1 || !per_task;
    const detail::Verbose vb;
    const Status st = one_by_one ? run_in_turn(kt, batch, item) : run_per_task(kt, batch, item);
    if (vb.on()) {
      const detail::GemmPlan plan =
          detail::plan_gemm(kt, detail::active_tuning(), item(0), one_by_one, int(threads));
      char names[96], rule[96];
      detail::gemm_kernel_names(plan, m, table.name, names, sizeof names);
      std::snprintf(rule, sizeof rule, "%s-%s", one_by_one ? "items-in-turn" : "item-per-task",
                    plan.rule);
      vb.print("sgemm_batched", st, rule, names, int(threads),
               "batch:%lld m:%lld n:%lld k:%lld ta:%c tb:%c", (long long)batch, (long long)m,
               (long long)n, (long long)k, trans_char(ta == Transpose::trans),
               trans_char(tb == Transpose::trans));
    }
    return st;
  });
}

namespace detail {

// Plans one product on the table t, runs it, and prints the TESSERA_VERBOSE line.
Status gemm_run_product(const char* op, const arch::KernelTable& t, const GemmProblem& p) {
  const GemmPlan plan =
      plan_gemm(t.gemm, active_tuning(), p, true, tbb::this_task_arena::max_concurrency());
  const Verbose vb;
  const Status st = gemm_execute(plan, p);
  if (vb.on()) {
    char names[96];
    gemm_kernel_names(plan, p.m, t.name, names, sizeof names);
    vb.print(op, st, plan.rule, names, plan.threads, "m:%lld n:%lld k:%lld ta:%c tb:%c",
             (long long)p.m, (long long)p.n, (long long)p.k, trans_char(p.ta), trans_char(p.tb));
  }
  return st;
}

}  // namespace detail
}  // namespace tessera
