// How the GEMM executors split work among threads (src/gemm/gemm_driver.cpp,
// src/gemm/gemm_rows.cpp): a 2-D grid of tasks, or one fixed contiguous share per thread. Every
// split only partitions C: no element's sum depends on it.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>

#include "runtime/arith.hpp"
#include "runtime/scratch.hpp"
#include "runtime/tsan.hpp"

namespace tessera::detail::gemm_split {
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Runs body(i_range, j_range) over an (mi x nj) grid, or serially. Rows are split first: when
// there are at least two row blocks per thread, whole rows go to each task (a task's packed A
// block then serves every column); otherwise columns are split too, to about 4 tasks per
// thread.
template <class F>
void for_grid(int64_t mi, int64_t nj, bool parallel, F&& body) {
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  if (threads <= 1 || mi * nj <= 1) {
    body(int64_t(0), mi, int64_t(0), nj);
    return;
  }
  const int64_t want = 4 * int64_t(threads);
  const int64_t n_chunks = mi >= 2 * threads ? 1 : std::min(nj, ceil_div(want, mi));
  const int64_t grain_j = ceil_div(nj, n_chunks);
  // Isolated: while this thread waits it runs only these tasks, never an unrelated Tessera
  // call from the same arena that would reuse the scratch buffers this call is holding.
  ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, mi, 1, 0, nj, grain_j),
                      task_body(fj,
                                [&](const tbb::blocked_range2d<int64_t>& r) {
                                  body(r.rows().begin(), r.rows().end(), r.cols().begin(),
                                       r.cols().end());
                                }),
                      tbb::simple_partitioner());
  });
  fj.join();
}

// body(t) for each t in [0, tasks), one TBB task each (isolated, as for_grid): the split of a
// problem into tasks is the caller's, a function of the problem alone.
template <class F>
void for_each_task(int64_t tasks, const F& body) {
  ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1),
                      task_body(fj,
                                [&](const tbb::blocked_range<int64_t>& r) {
                                  for (int64_t t = r.begin(); t < r.end(); ++t) body(t);
                                }),
                      tbb::simple_partitioner());
  });
  fj.join();
}

// One fixed contiguous share of [0, total) per slice, slice t on its own task (a static
// partition: a thread keeps the same share across calls): body(begin, end, last slice).
template <class F>
void static_slices(int64_t total, int64_t slices, F&& body) {
  // Isolated, as for_grid: a waiting thread runs only these tasks.
  ForkJoin fj;
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, slices, 1),
                      task_body(fj,
                                [&](const tbb::blocked_range<int64_t>& r) {
                                  for (int64_t t = r.begin(); t < r.end(); ++t)
                                    body(t * total / slices, (t + 1) * total / slices,
                                         t == slices - 1);
                                }),
                      tbb::static_partitioner());
  });
  fj.join();
}

// static_slices with one slice per thread (at most one per unit of work), or the whole range on
// the calling thread.
template <class F>
void thread_slices(int64_t total, bool parallel, F&& body) {
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  const int64_t slices = std::min<int64_t>(threads, total);
  if (slices <= 1)
    body(int64_t(0), total, true);
  else
    static_slices(total, slices, body);
}

// The scratch of a product's tasks: `floats` per task running at once (one slice when serial),
// reserved on the calling thread before any task writes C, so that an allocation failure leaves
// C untouched (tasks that allocated their own panels could fail after others had written).
// Zero floats reserve nothing. `given`: a serial product's scratch, reserved by its caller (a
// batch run one item per task: gemm_serial_floats), used instead.
class TaskScratch {
 public:
  bool reserve(size_t floats, bool parallel, float* given = nullptr) {
    floats_ = floats;
    given_ = given;
    if (floats == 0 || given) return true;
    return pool_.reserve(thread_scratch(ScratchSlot::gemm_tasks), floats,
                         parallel ? slices_for_arena() : 1);
  }
  // Runs f(slice) with a slice held for its duration (nullptr when nothing was reserved).
  template <class F>
  void with_slice(F&& f) {
    if (floats_ == 0) return f(static_cast<float*>(nullptr));
    if (given_) return f(given_);
    const Slices::Lease lease(pool_);
    f(lease.get());
  }

 private:
  Slices pool_;
  size_t floats_ = 0;
  float* given_ = nullptr;
};

// Floats rounded up to whole 64-byte lines, for buffers laid one after another in a slice.
inline size_t line_floats(size_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace tessera::detail::gemm_split
