#include "gemm_driver.hpp"

#include "tsan.hpp"

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>

#include "error.hpp"
#include "scratch.hpp"

namespace tessera::detail {
namespace {

using arch::GemmKernels;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

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

// C = beta C (alpha = 0 or k = 0: A and B are not read; beta = 0 writes zeros, reads nothing).
void scale_c(const GemmProblem& p, bool parallel) {
  for_grid(p.m, 1, parallel, [&](int64_t i0, int64_t i1, int64_t, int64_t) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = p.c + i * p.ldc;
      if (p.beta == 0.0f)
        std::fill(row, row + p.n, 0.0f);
      else
        for (int64_t j = 0; j < p.n; ++j) row[j] *= p.beta;
    }
  });
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

// ---- few rows of A times B^T: dot products, K read in place ------------------------------
void gemm_dot(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  const int64_t R = kt.dot_rows;
  const int64_t row_blocks = ceil_div(p.m, R);
  // Column blocks of 64 keys: enough work per task to hide the scheduling, and a fixed split.
  constexpr int64_t kColsPerTask = 64;
  auto body = [&](int64_t ib0, int64_t ib1, int64_t jb0, int64_t jb1) {
    for (int64_t ib = ib0; ib < ib1; ++ib) {
      const int64_t i = ib * R, rows = std::min(R, p.m - i), J = kt.dot_cols[rows];
      const float* a = p.a + i * p.lda;
      const int64_t j_end = std::min(p.n, jb1 * kColsPerTask);
      int64_t j = jb0 * kColsPerTask;
      if (rows == 1) {
        const int64_t whole = (j_end - j) / J * J;
        kt.dot_row_run(p.k, a, p.b + j * p.ldb, p.ldb, p.c + i * p.ldc + j, whole, p.alpha, p.beta);
        j += whole;
      }
      for (; j + J <= j_end; j += J)
        kt.dot[rows](p.k, a, p.lda, p.b + j * p.ldb, p.ldb, p.c + i * p.ldc + j, p.ldc, p.alpha,
                     p.beta);
      for (; j < j_end; ++j)
        kt.dot1[rows](p.k, a, p.lda, p.b + j * p.ldb, p.ldb, p.c + i * p.ldc + j, p.ldc, p.alpha,
                      p.beta);
    }
  };
  // On several threads, one fixed contiguous range of K rows per thread (a static partition, as
  // BLIS splits a GEMV): the product only streams K, and a caller that repeats it over the same
  // K (the benchmark; a K reused across steps) then finds each thread's range in its own L2,
  // where dynamic chunks landed on either core. 1 x 4096 x 128 on 2 threads, interleaved, 6
  // runs: 39.9 -> 43.3 GFLOP/s (median; BLIS 45 in the same runs).
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  const int64_t col_blocks = ceil_div(p.n, kColsPerTask);
  if (threads > 1 && col_blocks >= threads) {
    static_slices(col_blocks, threads,
                  [&](int64_t jb0, int64_t jb1, bool) { body(0, row_blocks, jb0, jb1); });
    return;
  }
  for_grid(row_blocks, col_blocks, parallel, body);
}

// ---- few rows of A times B in place: the wide kernels --------------------------------------
// m <= 4 (GEMV-like: decode's P V, a batch of a few tokens through a projection). The NR-column
// kernel gave one row only NV FMA chains, each k long, and read B as n / NR strided streams;
// the wide kernels (up to 8 vectors) give 8 chains and read a whole row of a 128-column B as
// one stream. The columns split into one contiguous run of whole vectors per thread (a static
// partition, as gemm_dot's); each call covers the widest run the table has; columns past the
// last whole vector are packed into a zero-padded panel (B is read in place only within its
// rows). Every C element is one accumulator lane summing k in order, so the sums do not depend
// on the split or the widths. AVX-512, interleaved, medians, GFLOP/s NR panels -> wide (oneDNN
// in the same runs): 1 x 128 x 4096 1 thread 26.2 -> 52.4 (42.5), 2 threads 52.9 -> 70.8
// (90.2); 4 x 1024 x 1024 1 thread 57.0 -> 100.2 (96.2), 2 threads 101.8 -> 158.1 (163.9).
// (Without the kernel's B prefetches the 4-row product ran ~20-30% faster, its 64-column
// strips hopping 4 KB rows, but whole 128-column rows ~14% slower, decode's P V among them.)
//
// A B past kStreamBBytes is streamed row by row instead (gemm_rows_stream.hpp), each thread's
// columns over blocks of 8 rows of k: whole 4 KB rows of B are read in turn, where the strips
// read 256 bytes of every row and ran at ~12 GB/s from L3. 4 x 1024 x 1024 (B 4 MB), medians
// of 5, GFLOP/s strips -> rows (oneDNN in the same run): 1 thread 23.6 -> 57.0 (44.5), 2
// threads 48.3 -> 88.7 (76.2). The sums are the wide kernels' (one accumulator, k in order).
// A narrow B (rows of at most kNarrowRowFloats) is split along k instead, at fixed positions
// (chunks of kWideKChunk rows: a function of k alone, never of the thread count, as the fused
// attention's decode chunks are): each chunk's sums go to a partial m x n block, and the blocks
// are added in chunk order, so C is the same for any number of threads. Split by columns, each
// thread read every B row in part (1 x 128 x 4096: 256 of each 512 bytes) and the hardware
// prefetchers fetched the other thread's lines as well; split by k, each thread streams one
// contiguous range. Two threads on 1 x 128 x 4096, standalone loops, medians of 20000 calls:
// 17.2 us by columns, 9.6 us by k (oneDNN: 11.1 us).
// The calling thread's zero-padded panel for gemm_wide_rows' columns past the last whole vector
// of n, k rows deep: nullptr when n is whole vectors, or when it cannot be allocated (oom set).
float* tail_panel(const GemmKernels& kt, int64_t n, int64_t k, std::atomic<bool>& oom) {
  if (n % kt.simd_floats == 0) return nullptr;
  float* panel = thread_scratch(ScratchSlot::gemm_b).floats(size_t(k * kt.nr));
  if (!panel) oom = true;
  return panel;
}

// A thread's share of a streamed B up to this much may be found in its L2 again by the next
// call (Zen 4 and 5: 1 MB of L2 per core).
constexpr double kL2Bytes = 1 << 20;

constexpr int64_t kNarrowRowFloats = 256;
constexpr int64_t kWideKChunk = 1024;

bool wide_splits_k(const GemmProblem& p) {
  return p.n <= kNarrowRowFloats && p.k >= 2 * kWideKChunk;
}

Status gemm_wide_k_chunks(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  const int64_t chunks = ceil_div(p.k, kWideKChunk), block = p.m * p.n;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  float* partial = thread_scratch(ScratchSlot::gemm_a).floats(size_t(chunks * block));
  if (!partial) return fail(Status::out_of_memory, "cannot allocate the partial sums");
  std::atomic<bool> oom{false};
  // A thread's share of B past L2 streams from L3 or memory: the prefetching kernels, where the
  // table has them. With a share that fits (1 x 128 x 4096 on 2 threads: 1 MB each) they ran
  // slower on Zen 5. Alternated medians, GFLOP/s, wide -> wide_prefetching: 1 x 128 x 4096,
  // 1 thread 53.6 -> 63.8; 2 x 128 x 4096, 1 thread 102.4 -> 114.9; 1 x 128 x 8192 on 2
  // threads 94.2 -> 109.6; 1 x 128 x 4096 on 2 threads 110.2 -> 105.4.
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  const double share_bytes = 4.0 * double(ceil_div(chunks, threads) * kWideKChunk) * double(p.n);
  const bool b_streams = kt.prefetch_streamed_b && share_bytes > kL2Bytes;
  auto run = [&](int64_t c0, int64_t c1, bool) {
    float* panel = tail_panel(kt, p.n, kWideKChunk, oom);
    if (oom) return;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k0 = c * kWideKChunk;
      gemm_wide_rows(kt, p.m, std::min(kWideKChunk, p.k - k0), p.a + k0 * a_cs, a_rs, a_cs,
                     p.b + k0 * p.ldb, p.ldb, partial + c * block, p.n, p.n, 1.0f, 0.0f, panel,
                     b_streams);
    }
  };
  thread_slices(chunks, parallel, run);
  if (oom) return fail(Status::out_of_memory, "cannot allocate a packed B panel");
  // Chunk 0's block accumulates the others, in chunk order.
  for (int64_t q = 1; q < chunks; ++q)
    for (int64_t e = 0; e < block; ++e) partial[e] += partial[q * block + e];
  for (int64_t i = 0; i < p.m; ++i) {
    float* c = p.c + i * p.ldc;
    const float* sum = partial + i * p.n;
    if (p.beta == 0.0f)
      for (int64_t j = 0; j < p.n; ++j) c[j] = p.alpha * sum[j];
    else
      for (int64_t j = 0; j < p.n; ++j) c[j] = p.alpha * sum[j] + p.beta * c[j];
  }
  return Status::ok;
}

// A B past this many bytes is streamed row by row (gemm_rows_stream.hpp) rather than walked in
// strips: half of a 2 MB L2, so that a B the strips would find in L2 keeps the wide kernels.
constexpr double kStreamBBytes = 1 << 20;

Status gemm_wide(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  if (wide_splits_k(p)) return gemm_wide_k_chunks(kt, p, parallel);
  const int64_t W = kt.simd_floats, vectors = p.n / W;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  const bool stream = 4.0 * double(p.k) * double(p.n) > kStreamBBytes;
  std::atomic<bool> oom{false};
  // Vectors [v0, v1), and the columns past the last whole vector with the last slice.
  auto columns = [&](int64_t v0, int64_t v1, bool tail) {
    int64_t n = tail ? p.n - v0 * W : (v1 - v0) * W, j0 = v0 * W;
    if (stream && v1 > v0) {
      const int64_t whole = (v1 - v0) * W;
      float* acc = thread_scratch(ScratchSlot::gemm_a).floats(size_t(p.m * whole));
      if (!acc) {
        oom = true;
        return;
      }
      kt.rows_stream[p.m](p.k, p.a, a_rs, a_cs, p.b + j0, p.ldb, acc, p.c + j0, p.ldc, whole,
                          p.alpha, p.beta);
      j0 += whole, n -= whole;
      if (n == 0) return;
    }
    float* panel = tail_panel(kt, n, p.k, oom);
    if (oom) return;
    gemm_wide_rows(kt, p.m, p.k, p.a, a_rs, a_cs, p.b + j0, p.ldb, p.c + j0, p.ldc, n, p.alpha,
                   p.beta, panel);
  };
  thread_slices(vectors, parallel, columns);
  return oom ? fail(Status::out_of_memory, "cannot allocate a packed B panel or the sums")
             : Status::ok;
}

// ---- A read in place (no packing of A): few rows, small and mid-size products -----------------
// B not transposed with every row starting on a 64-byte line.
bool b_rows_aligned(const GemmProblem& p) {
  return !p.tb && reinterpret_cast<uintptr_t>(p.b) % 64 == 0 && p.ldb % 16 == 0;
}

// The smallest L1d we target: what a B read in place (b_span_fits_l1) or a packed small-tile
// panel (small_tiles_form) may span and still stay in L1 across the row tiles.
constexpr double kL1Bytes = 32768.0;

// B not transposed, its k rows spanning at most kL1Bytes: a B panel read in place then stays
// in L1 across the row tiles whatever its alignment and stride (a contiguous span of at most
// the cache's size fills no set beyond its ways), and packing it would cost more than its
// unaligned loads. 1 thread, 16-byte aligned B, against OpenBLAS
// SkylakeX in the same process (medians of 41 x 200 calls): 32^3 0.78 -> 0.90x, 64^3 0.87 ->
// 0.96x, 64 x 64 x 128 0.85 -> 0.96x. Past it, 128^3 (64 KB, rows 512 bytes apart: 1/8 of L1's
// sets) ran 4% slower.
bool b_span_fits_l1(const GemmProblem& p) {
  return !p.tb && 4.0 * double(p.k) * double(p.ldb) <= kL1Bytes;
}

// column_slices: on several threads, one fixed share of the column panels per thread, all rows
// (small products: fewer, larger tasks than for_grid's 2-D split; see gemm_run).
Status gemm_unpacked_a(const GemmKernels& kt, const GemmProblem& p, bool parallel,
                       bool column_slices) {
  const int64_t MR = kt.mr, NR = kt.nr;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  const int64_t panels = ceil_div(p.n, NR);
  // Whole panels of B are read in place when their rows are 64-byte aligned (a vector load
  // that straddles two lines costs two: 256^3 in place ran 8% slower from a 16-byte aligned B);
  // the others, and B^T, are packed a panel at a time by the task that uses them, so no
  // packing step of its own (a fork-join) comes before the products.
  // With one row panel (few rows) a panel is used once: read in place, aligned or not; so is one
  // whose rows fit L1 together (b_span_fits_l1).
  const bool b_in_place = !p.tb && (b_rows_aligned(p) || b_span_fits_l1(p) || p.m <= MR);
  std::atomic<bool> oom{false};
  // Column panels split first: a task then packs only the panels it uses.
  const auto body = [&](int64_t q0, int64_t q1, int64_t ib0, int64_t ib1) {
    float* buf = nullptr;
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j = q * NR, nr = std::min(NR, p.n - j);
      const float* b = p.b + j;
      int64_t ldb = p.ldb;
      if (!b_in_place || nr < NR) {
        if (!buf) buf = thread_scratch(ScratchSlot::gemm_b).floats(size_t(NR * p.k));
        if (!buf) {
          oom = true;
          return;
        }
        kt.pack_b(p.tb, p.k, nr, p.tb ? p.b + j * p.ldb : b, p.ldb, buf);
        b = buf, ldb = NR;
      }
      // The whole row tiles in one run, then the partial one.
      const int64_t whole_ib1 = std::min(ib1, p.m / MR);
      if (whole_ib1 > ib0)
        kt.strided_run({whole_ib1 - ib0, MR * a_rs, 0, MR * p.ldc}, p.k, p.a + ib0 * MR * a_rs,
                       a_rs, a_cs, b, ldb, p.c + ib0 * MR * p.ldc + j, p.ldc, nr, p.alpha, p.beta);
      for (int64_t ib = std::max(ib0, whole_ib1); ib < ib1; ++ib) {
        const int64_t i = ib * MR, rows = p.m - i;
        kt.strided[rows](p.k, p.a + i * a_rs, a_rs, a_cs, b, ldb, p.c + i * p.ldc + j, p.ldc, nr,
                         p.alpha, p.beta);
      }
    }
  };
  if (parallel && column_slices)
    thread_slices(panels, true,
                  [&](int64_t q0, int64_t q1, bool) { body(q0, q1, 0, ceil_div(p.m, MR)); });
  else
    for_grid(panels, ceil_div(p.m, MR), parallel, body);
  if (oom) return fail(Status::out_of_memory, "cannot allocate a packed B panel");
  return Status::ok;
}

// ---- small products, and k <= 128: runs of the table's small tiles -----------------------------
// Rows [i0, i1) (i0 a multiple of the small tile's rows) of one column block of the small
// tiles, B rows ldb apart: the whole tiles as one run, then the rows past them through the
// wide kernel of the same width (table.hpp checks it exists).
void small_column(const GemmKernels& kt, const GemmProblem& p, int64_t a_rs, int64_t a_cs,
                  int64_t i0, int64_t i1, const float* b, int64_t ldb, float* c, int64_t nr) {
  const int64_t R = kt.small_rows, whole_end = i0 + (i1 - i0) / R * R, rest = i1 - whole_end;
  if (whole_end > i0)
    kt.small_run({(whole_end - i0) / R, R * a_rs, 0, R * p.ldc}, p.k, p.a + i0 * a_rs, a_rs, a_cs,
                 b, ldb, c + i0 * p.ldc, p.ldc, nr, p.alpha, p.beta);
  if (rest > 0)
    kt.wide[rest][arch::wide_index(kt, int(rest), kt.small_cols / kt.simd_floats)](
        p.k, p.a + whole_end * a_rs, a_rs, a_cs, b, ldb, c + whole_end * p.ldc, p.ldc, nr, p.alpha,
        p.beta);
}

// How a product meets the small tiles (4 x 64 on AVX-512), if it does.
enum class SmallTiles {
  none,        // the MR x NR tiles serve it
  b_in_place,  // B read in place, each thread a share of the row tiles
  b_panels,    // each thread a share of the column panels, each packed just before its tiles
};

// B in place needs whole panels and a B whose k rows span L1 (b_span_fits_l1): past it, rows
// 512 bytes apart (128^3) fill 16 lines of each set they use where L1 has 12 ways, and every row
// tile reads the panel from L2 again. A panel packed (64 x 128 x 4 B = 32 KB, contiguous) is
// then reused from L1 by all the rows. Zen 5, alternated medians, GFLOP/s, in place -> packed
// panels (1 thread / 2 threads): 128^3 196 / 347 -> 256 / 443, 64 x 256 x 128 198 / 354 -> 243
// / 428, 128 x 256 x 64 192 / 343 -> 251 / 442 (the MR x NR tiles: 240 / 429, 239 / 418).
// Packing all panels first and splitting rows ran as fast on 1 thread but lost on 2 (128^3
// 377), the packing being serial; a panel deeper than 128 (64 KB) no longer stays in L1, and
// 32 x 256 x 256 ran 204 against 219 on the MR x NR tiles, so it keeps them. B^T is always
// packed: a panel at a time ran as fast as packing it all first on 1 thread (128^3 249 -> 251,
// 64 x 128 x 64 231 -> 239) and lets 2 threads share the panels (128^3 432 -> 445, 128 x 256
// x 64 426 -> 445, 64 x 128 x 64 315 -> 336, against the MR x NR tiles).
//
// Past the small products, a product with k <= 128 (a packed panel within 32 KB) whose A is read
// in place from L2 or L3 (at most kPanelsAInPlaceBytes, not transposed) takes the packed panels
// too, and skips the blocked path's packing of A: BLIS's loops with NR = 64, KC = k and A in
// place. Zen 5, alternated medians, GFLOP/s blocked -> packed panels (1 thread / 2 threads):
// 4096 x 4096 x 64 with B^T (attention's scores) 242 / 480 -> 245 / 491, 4096 x 4096 x 128 247
// / 474 -> 250 / 496, 1024 x 1024 x 64 243 / 468 -> 260 / 502, 512^2 x 128 248 / 483 -> 258 /
// 501, 2048 x 128 x 128 250 / 481 -> 262 / 497, 4096 x 512 x 32 227 / 421 -> 257 / 483, 1024 x
// 1000 x 64 (a partial panel) 244 / 468 -> 256 / 495. Where it lost: A of 4 MB (16384 x 1024 x
// 64: 243 -> 239, read from L3 once per panel), A^T (4096 x 1024 x 64: 246 -> 219; the tiles
// read A^T a strided row per k step) and panels that do not divide among the threads (512 x 320
// x 96, 5 panels on 2: 476 -> 419).
constexpr double kPanelsAInPlaceBytes = 2.0 * (1 << 20);

SmallTiles small_tiles_form(const GemmKernels& kt, const GemmProblem& p, int threads, bool small) {
  if (!kt.small_run) return SmallTiles::none;
  const int64_t NS = kt.small_cols;
  const bool panels_per_thread = ceil_div(p.n, NS) % threads == 0;
  const bool panel_fits_l1 = 4.0 * double(p.k) * double(NS) <= kL1Bytes;
  if (!small)
    return !p.ta && panel_fits_l1 && panels_per_thread &&
                   4.0 * double(p.m) * double(p.k) <= kPanelsAInPlaceBytes
               ? SmallTiles::b_panels
               : SmallTiles::none;
  if (p.tb) return panels_per_thread ? SmallTiles::b_panels : SmallTiles::none;
  if (!kt.small_b_in_place || p.n % NS != 0) return SmallTiles::none;
  if (b_span_fits_l1(p)) return SmallTiles::b_in_place;
  return panel_fits_l1 && panels_per_thread ? SmallTiles::b_panels : SmallTiles::none;
}

// A product through the small tiles, in the form small_tiles_form chose. The 64^3 x 256
// batch with B^T (one item per task), alternated medians: on Zen 5, against 14 x 32 tiles over
// 32-column panels, 217.7 -> 231.0 GFLOP/s on 1 thread, 426.7 -> 461.8 on 2; on Sapphire
// Rapids, against 14 x 32 tiles over 32-column panels with A in place, 96.7 -> 105.0 and 190.3
// -> 211.7. B in place on AMD only (GemmKernels::small_b_in_place): kAvx512Gemm in
// arch/common/blocking.hpp.
Status gemm_small_tiles(const GemmKernels& kt, const GemmProblem& p, SmallTiles form,
                        bool parallel) {
  const int64_t NS = kt.small_cols, R = kt.small_rows;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  if (form == SmallTiles::b_in_place) {
    thread_slices(ceil_div(p.m, R), parallel, [&](int64_t t0, int64_t t1, bool) {
      const int64_t i0 = t0 * R, i1 = std::min(p.m, t1 * R);
      for (int64_t j = 0; j < p.n; j += NS)
        small_column(kt, p, a_rs, a_cs, i0, i1, p.b + j, p.ldb, p.c + j, NS);
    });
    return Status::ok;
  }
  std::atomic<bool> oom{false};
  thread_slices(ceil_div(p.n, NS), parallel, [&](int64_t q0, int64_t q1, bool) {
    float* panel = thread_scratch(ScratchSlot::gemm_b).floats(size_t(NS * p.k));
    if (!panel) {
      oom = true;
      return;
    }
    for (int64_t j = q0 * NS; j < std::min(p.n, q1 * NS); j += NS) {
      const int64_t nr = std::min(NS, p.n - j);
      kt.pack_b_small(p.tb, p.k, nr, p.tb ? p.b + j * p.ldb : p.b + j, p.ldb, panel);
      small_column(kt, p, a_rs, a_cs, 0, p.m, panel, NS, p.c + j, nr);
    }
  });
  return oom ? fail(Status::out_of_memory, "cannot allocate a packed B panel") : Status::ok;
}

// ---- the blocked path: pack A blocks and B blocks, micro-kernels over the packed panels --------
// Blocks of at most this many B panels (NR columns each) read A in place (see gemm_blocked).
constexpr int64_t kMaxPanelsWithAInPlace = 16;

// A read in place past this many bytes by one or two B panels is read once from L3 or memory,
// a tile's rows at a time: each tile fetches the next one's rows into L2 (TileRun::a_next).
// Zen 5, alternated medians, GFLOP/s without -> with, 1 thread / 2 threads: P V 4096 x 64 x
// 4096 (A 64 MB) 201 / 429 -> 235 / 476; 4096 x 128 x 4096 217 / 440 -> 237 / 473; 4096 x 64 x
// 1024 (16 MB) 231 / 489 -> 252 / 486; 2048 x 64 x 2048 246 / 466 -> 250 / 462; at 8 MB (512 x
// 128 x 4096) it lost 2-3% (248 / 426 -> 244 / 415). With A reused by more panels (512^3, 8
// of them) the rows are in L2 by the second panel, and the fetches cost 1-2%.
constexpr double kAStreamBytes = 8.0 * (1 << 20);

Status gemm_blocked(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  const int64_t MR = kt.mr, NR = kt.nr, KC = kt.kc, NC = kt.nc;
  // Row blocks: at most MC rows each, at least two per thread, their count a multiple of the
  // thread count, and the MR panels dealt out evenly among them, so that threads split rows
  // (each packs its A block once, rather than splitting N and re-packing A per chunk) and
  // finish together. (Blocks of MC = 336 rows made 7 blocks of 2048 rows: 4 + 3 on 2 threads,
  // 1.72x the 1-thread rate.) Blocks only partition rows: the sums, and so the results, do
  // not depend on them.
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  const int64_t row_panels = ceil_div(p.m, MR);
  const int64_t row_blocks = std::min(
      row_panels,
      round_up(std::max(ceil_div(p.m, int64_t(kt.mc)), int64_t(2) * threads), int64_t(threads)));
  const int64_t MC = ceil_div(row_panels, row_blocks) * MR;  // the largest block
  // Block ib: rows [first_row(ib), first_row(ib + 1)).
  auto first_row = [&](int64_t ib) { return std::min(p.m, ib * row_panels / row_blocks * MR); };
  const int64_t n_padded = round_up(p.n, NR);
  float* b_buf = nullptr;
  if (!p.b_packed) {
    b_buf = thread_scratch(ScratchSlot::gemm_b)
                .floats(size_t(std::min(KC, p.k) * std::min(round_up(NC, NR), n_padded)));
    if (!b_buf) return fail(Status::out_of_memory, "cannot allocate the packed B block");
  }
  std::atomic<bool> oom{false};
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  // Packing A pays only when the packed block is reused over enough B panels: the kernel reads
  // A in place (rows lda apart) nearly as fast as a packed panel, so the copy has to be spread
  // thin. Measured here (AVX-512, 1 thread, 16-byte aligned operands, GFLOP/s packed -> in
  // place): 256^3 152 -> 159, 512^3 151 -> 156-161, 4096 x 512 x 64 149 -> 152, 2048 x 256 x
  // 128 152 -> 159; past 16 panels packing is as fast or faster: 768^3 +1-3% in place,
  // 1024^3 -1%, 512 x 2048 x 512 -1-10%, 2048^3 -2%.
  const bool pack_a = ceil_div(std::min(NC, p.n), NR) > kMaxPanelsWithAInPlace;
  // A read in place by one or two panels and past kAStreamBytes (P V): each tile fetches the
  // next one's rows.
  const bool a_next =
      !pack_a && !p.ta && ceil_div(p.n, NR) <= 2 && 4.0 * double(p.m) * double(p.k) > kAStreamBytes;
  // BLIS's order (NR panels outside, MR panels inside) keeps a B micro-panel in L1 while the A
  // panels pass, but walks down C's rows: every tile lands on MR new pages and lines. With a
  // short k (at most 128) writing C dominates, and the MR panels go outside instead, so that
  // successive tiles continue the same rows: attention's score matrix 4096 x 4096 x 64 went
  // from ~80 to ~135 GFLOP/s on 1 thread, ~150 to ~235 on 2 (streaming stores for C, tried
  // with either order, changed nothing measurable once the rows run on).
  const bool rows_outer = std::min(KC, p.k) <= 128;
  for (int64_t jc = 0; jc < p.n; jc += NC) {
    const int64_t nc = std::min(NC, p.n - jc);
    const int64_t panels = ceil_div(nc, NR);
    for (int64_t pc = 0; pc < p.k; pc += KC) {
      const int64_t kc = std::min(KC, p.k - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      const float* bp;
      if (p.b_packed) {
        bp = p.b_packed + pc * n_padded + jc * kc;
      } else {
        // Pack this KC x NC block of op(B) once, shared by every task below.
        for_grid(1, panels, parallel, [&](int64_t, int64_t, int64_t q0, int64_t q1) {
          const int64_t j = jc + q0 * NR, cols = std::min(q1 * NR, nc) - q0 * NR;
          const float* src = p.tb ? p.b + j * p.ldb + pc : p.b + pc * p.ldb + j;
          kt.pack_b(p.tb, kc, cols, src, p.ldb, b_buf + q0 * NR * kc);
        });
        bp = b_buf;
      }
      for_grid(row_blocks, panels, parallel, [&](int64_t ib0, int64_t ib1, int64_t q0, int64_t q1) {
        float* a_buf = nullptr;
        if (pack_a) {
          a_buf = thread_scratch(ScratchSlot::gemm_a).floats(size_t(MC * kc));
          if (!a_buf) {
            oom = true;
            return;
          }
        }
        for (int64_t ib = ib0; ib < ib1; ++ib) {
          const int64_t ic = first_row(ib), mc = first_row(ib + 1) - ic;
          const float* a_src = p.ta ? p.a + pc * p.lda + ic : p.a + ic * p.lda + pc;
          if (pack_a) kt.pack_a(p.ta, mc, kc, a_src, p.lda, a_buf);
          // Tile (q, ir): B panel q, the MR rows from ir (fewer in a partial tile, which is
          // alone); whole tiles go as a run of `count` from it, along a row of tiles (across B
          // panels) or down a column (across A panels).
          auto tiles = [&](int64_t q, int64_t ir, int64_t count, bool along_row) {
            const int64_t j = jc + q * NR, nr = std::min(NR, p.n - j);
            const int64_t rows = std::min(MR, mc - ir);
            const float* b_panel = bp + q * NR * kc;
            float* c = p.c + (ic + ir) * p.ldc + j;
            const float* a = pack_a ? a_buf + ir * kc : a_src + ir * a_rs;
            if (rows == MR) {
              arch::TileRun run =
                  along_row ? arch::TileRun{count, 0, NR * kc, NR}
                            : arch::TileRun{count, pack_a ? MR * kc : MR * a_rs, 0, MR * p.ldc};
              if (!along_row) {
                // Down a column the run reuses one B micro-panel; the next one (the next column,
                // or the first of the next row block) was last read a whole B block ago and
                // comes from L3, and the first tile to read it, left to the kernel's prefetches,
                // ran 4 times slower than the others (6 x 64 at KC 1024: ~12% of a column of
                // 28 tiles). The run brings it into L2 meanwhile.
                const int64_t next = q + 1 < q1 ? q + 1 : ib + 1 < ib1 ? q0 : -1;
                if (next >= 0) {
                  run.l2_next = bp + next * NR * kc;
                  run.l2_lines = ceil_div(NR * kc / arch::kLineFloats, count);
                }
                run.a_next = a_next;
              }
              if (pack_a)
                kt.packed_run(run, kc, a, b_panel, c, p.ldc, nr, p.alpha, beta);
              else
                kt.strided_run(run, kc, a, a_rs, a_cs, b_panel, NR, c, p.ldc, nr, p.alpha, beta);
            } else if (pack_a) {
              kt.packed[rows](kc, a, b_panel, c, p.ldc, nr, p.alpha, beta);
            } else {
              kt.strided[rows](kc, a, a_rs, a_cs, b_panel, NR, c, p.ldc, nr, p.alpha, beta);
            }
          };
          // Runs take whole tiles only: the panels with all NR columns, the rows of whole MR.
          const int64_t whole_q1 = std::max(q0, std::min(q1, nc / NR)), whole_rows = mc / MR * MR;
          if (rows_outer) {
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int64_t q_rest = ir < whole_rows ? whole_q1 : q0;
              if (q_rest > q0) tiles(q0, ir, q_rest - q0, true);
              for (int64_t q = q_rest; q < q1; ++q) tiles(q, ir, 1, true);
            }
          } else {
            for (int64_t q = q0; q < q1; ++q) {
              if (whole_rows > 0) tiles(q, 0, whole_rows / MR, false);
              if (whole_rows < mc) tiles(q, whole_rows, 1, false);
            }
          }
        }
      });
      if (oom) return fail(Status::out_of_memory, "cannot allocate a packed A block");
    }
  }
  return Status::ok;
}

}  // namespace

// The deep tile also takes narrow products made of whole deep panels (n = 64, 128 on AVX-512:
// P V, a head's values). With one or two 14 x 32 panels the driver reads A in place, and 14 rows
// lda apart fall in one L1 set when lda is a multiple of 1024 floats (8-way on Zen 4, 12-way on
// Sapphire Rapids): every k step misses. The deep tile's 6 rows fit the ways, and one 64-column
// panel reads A once. Zen 4, 1 thread, alternated medians, GFLOP/s 14 x 32 -> 6 x 64:
// 4096 x 64 x 4096 78.9 -> 104.8 (2 threads 130.1 -> 197.1), 4096 x 128 x 4096 82.8 -> 108.8,
// 1024 x 64 x 1024 87.3 -> 112.3; with a partial panel (n = 96) no better (81.9 -> 80.6).
const GemmKernels& blocked_kernels(const GemmKernels& kt, int64_t k, int64_t n) {
  if (kt.deep == nullptr || k <= 128) return kt;
  const int64_t deep_nr = kt.deep->nr;
  return n >= 4 * deep_nr || n % deep_nr == 0 ? *kt.deep : kt;
}

void gemm_wide_rows(const GemmKernels& kt, int64_t r, int64_t k, const float* a, int64_t a_rs,
                    int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n,
                    float alpha, float beta, float* panel, bool b_streams) {
  const int64_t W = kt.simd_floats, whole = n / W * W;
  const auto& wide = b_streams ? kt.wide_prefetching : kt.wide;
  for (int64_t j0 = 0; j0 < whole;) {
    const int j = arch::wide_index(kt, int(r), (whole - j0) / W);
    const int64_t nr = (int64_t(1) << j) * W;
    wide[r][j](k, a, a_rs, a_cs, b + j0, ldb, c + j0, ldc, nr, alpha, beta);
    j0 += nr;
  }
  if (whole == n) return;
  kt.pack_b(false, k, n - whole, b + whole, ldb, panel);
  kt.wide[r][0](k, a, a_rs, a_cs, panel, kt.nr, c + whole, ldc, n - whole, alpha, beta);
}

size_t gemm_packed_b_floats(const GemmKernels& table, int64_t k, int64_t n) {
  return size_t(k) * size_t(round_up(n, blocked_kernels(table, k, n).nr));
}

void gemm_pack_b_full(const GemmKernels& table, bool tb, int64_t k, int64_t n, const float* b,
                      int64_t ldb, float* out) {
  const GemmKernels& kt = blocked_kernels(table, k, n);
  const int64_t n_padded = round_up(n, kt.nr);
  for (int64_t pc = 0; pc < k; pc += kt.kc) {
    const int64_t kc = std::min<int64_t>(kt.kc, k - pc);
    kt.pack_b(tb, kc, n, tb ? b + pc : b + pc * ldb, ldb, out + pc * n_padded);
  }
}

// Mid-size products on several threads: the columns split into one slice per thread, each slice
// a serial blocked product (its own A and B packing, no packing step shared between threads).
// Shared, B was packed in a fork-join of its own before the products and half of it then read
// from the other core's cache; per slice, each thread packs all of A (A and B are at most 4 MB)
// and only its own B. 2 threads, operands 16 bytes past a line, interleaved, medians of 6 runs:
// 256^3 222 -> 266 GFLOP/s, 512^3 240 -> 289 (score-shaped products, k = 64, were no better
// then; they are now, below).
// Large products split the same way when every thread gets at least 4 panels: each thread then
// runs its whole k loop without meeting the other at a B-packing fork-join per KC block, at the
// cost of packing all of A once per thread. 2 threads, alternated medians, GFLOP/s shared
// blocks -> column slices: on the deep tile 1024^3 516.2 -> 548.9, 2048^3 523.3 -> 534.8 (row
// slices, each thread packing all of B: 535.9 and 531.6); Q K^T 4096 x 4096 x 64 486.6 -> 505.4
// (and 482.7 -> 501.6, 493.0 -> 499.0 in two more rounds).
// The sums are those of the blocked path whatever the slicing: a C tile's k loop never splits.
Status gemm_column_split(const GemmKernels& kt, const GemmProblem& p) {
  const int64_t panels = ceil_div(p.n, kt.nr);
  const int64_t slices = std::min<int64_t>(panels, tbb::this_task_arena::max_concurrency());
  std::atomic<int> status{static_cast<int>(Status::ok)};
  for_grid(slices, 1, true, [&](int64_t s0, int64_t s1, int64_t, int64_t) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t j0 = panels * s / slices * kt.nr;
      const int64_t j1 = std::min(p.n, panels * (s + 1) / slices * kt.nr);
      GemmProblem slice = p;
      slice.n = j1 - j0;
      slice.b = p.tb ? p.b + j0 * p.ldb : p.b + j0;
      slice.c = p.c + j0;
      const Status st = gemm_blocked(kt, slice, false);
      if (st != Status::ok) status = static_cast<int>(st);
    }
  });
  // (The slice's own message went to the worker thread that failed.)
  if (status != static_cast<int>(Status::ok))
    return fail(static_cast<Status>(status.load()), "cannot allocate a packed block");
  return Status::ok;
}

// Large products take column slices (gemm_column_split) on at most this many threads: each
// slice is one more read of all of A from memory, and past 4 (not measured here) the shared
// blocks of gemm_blocked stay.
constexpr int kMaxColumnSlices = 4;

// Mid-size products: A and B together at most this much (split by columns on several threads;
// see gemm_run).
constexpr double kMidOperandBytes = 4.0 * (1 << 20);
// Mid-size products read A (and a 64-byte aligned B) in place up to this much. On
// Sapphire Rapids (2 MB L2), alternated medians, GFLOP/s, 512^3 aligned (A and B 2 MB) in place
// -> packed: 149.9 -> 161.6 on 1 thread, 291.8 -> 316.5 on 2; 256^3 aligned (512 KB) stays in
// place, 170.0 / 315.7 against 163.6 / 282.5 packed from a misaligned B in the same run. (Zen 5
// had preferred in place up to 4 MB: 512^3 160 -> 162 GFLOP/s, 240 -> 300 on 2 threads.)
constexpr double kMidInPlaceBytes = 1 << 20;

// Products of fewer multiply-adds than this run on the calling thread alone (gemm_run). Zen 4,
// 2 threads, alternated medians, GFLOP/s serial -> split: 64^3 106 -> 130 (one panel per
// thread; for_grid's 8 tasks: 117), 64^3 with B^T 104 -> 120, 128 x 64 x 64 105 -> 145-150,
// 96^3 106 -> 152; 64 x 64 x 32 (131k) 98 -> 92 and 48^3 66 -> 60 stay serial. In a busier
// minute of the VM, all three in one process: 64^3 serial 93, for_grid 107, panels per thread
// 107; 96^3 105, 140, 123 (so an odd panel count keeps for_grid). (On Sapphire Rapids an
// earlier driver, splitting 64^3 into 8 tasks, had measured 153 -> 126.)
constexpr double kMinParallelMacs = 2.0e5;

Status gemm_run(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  if (p.m == 0 || p.n == 0) return Status::ok;
  // Below kMinParallelMacs multiply-adds (10^6 with few rows) a fork-join costs more than a
  // second core saves, unless the operands are large enough that the product is bound by
  // reading them, where a second core adds bandwidth (the decode shape 1 x 4096 x 128 reads
  // 2 MB: 25 GFLOP/s serially, 43 on 2 threads). The split never changes the sums, so this
  // affects speed only.
  const double operand_bytes = 4.0 * (double(p.m) * p.k + double(p.k) * p.n);
  const bool few_rows = p.m <= 2 * kt.dot_rows;
  const double macs = double(p.m) * p.n * p.k;
  if (macs < (few_rows ? 1.0e6 : kMinParallelMacs) && operand_bytes < 1.0e6) parallel = false;
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  if (p.alpha == 0.0f || p.k == 0) {
    scale_c(p, parallel);
    return Status::ok;
  }
  // Few rows: pack nothing of A (packing would cost as much as the product); B^T is then best
  // read as dot products along k, B by the wide kernels in place (A^T with B^T: NR panels). Small
  // products go to the table's small tiles where small_tiles_form says so; the others run by one
  // thread read B in place when its rows span at most L1 (b_span_fits_l1), else take the blocked
  // path, whose one packing step for all of B beat packing it panel by panel (64^3: 2-3%). Run by
  // several, they skip the shared packing of B: its own fork-join would double the scheduling cost
  // of a product that takes ~20 us (128^3 on 2 threads: 119 GFLOP/s packed, 240 without). Mid-size
  // products (A and B within 1 MB, k > 128; kMidInPlaceBytes) read A in place too, and B where its
  // rows are 64-byte aligned: no packing, no pack fork-join, one pass over C, the B rows' strides
  // covered by the micro-kernel's prefetches. AVX-512, interleaved, best of runs, GFLOP/s blocked
  // -> in place: 256^3 157 -> 167 (1 thread), 214 -> 258 (2); 512^3 160 -> 162, 240 -> 300; with
  // A and B beyond L2 (2048^3, 2 threads) 300 -> 170. A misaligned B, or B^T, gemm_unpacked_a
  // packs a panel at a time inside the tasks (a 16-byte aligned B read in place had run ~10%
  // slower than blocked), so that the products still skip the blocked path's packing of A. Zen
  // 5, alternated medians, GFLOP/s blocked -> A in place, B packed per panel (1 thread): 256^3
  // with B 16 bytes off a line 251.1 -> 253.9 (2 threads 483.3 -> 484.7), B^T 244.9 -> 248.5,
  // A^T and B^T 236.2 -> 245.8, 200 x 300 x 256 B^T 222.3 -> 229.5; 384^3, past the bound, 256.8
  // -> 257.0 (Intel not measured in this form). Short k stays blocked (rows outer: C rows).
  // Prepacked B always takes the blocked
  // path, whose KC blocks its layout follows.
  if (p.b_packed) return gemm_blocked(blocked_kernels(kt, p.k, p.n), p, parallel);
  if (few_rows && p.tb && !p.ta) {
    gemm_dot(kt, p, parallel);
    return Status::ok;
  }
  if (few_rows && !p.tb && p.m <= arch::kMaxWideRows) return gemm_wide(kt, p, parallel);
  const bool small = double(p.m) * p.n * p.k <= 128.0 * 128 * 128;
  const bool mid = !small && p.k > 128 && operand_bytes <= kMidOperandBytes;
  if (const SmallTiles form =
          few_rows && !small ? SmallTiles::none : small_tiles_form(kt, p, threads, small);
      form != SmallTiles::none)
    return gemm_small_tiles(kt, p, form, parallel);
  if (few_rows || (small && (parallel || b_span_fits_l1(p))) ||
      (mid && operand_bytes <= kMidInPlaceBytes)) {
    // A small product on one thread with B past L1 (128^3) reads A in place faster with the
    // deep tile (where the small tiles do not take it): 1 thread, alternated medians, 14 x 32
    // -> 6 x 64: 260.5 -> 268.3 GFLOP/s (Zen 5). On two threads, with two 64-column panels to
    // share, it ran slower (medians 379 -> 329). With B in L1 (64^3, 16 bytes past a line) the
    // 14 x 32 tile stays: on Sapphire Rapids 155.8 GFLOP/s against 147.3 with 6 x 64.
    const bool deep_small =
        kt.deep != nullptr && small && !few_rows && threads == 1 && !b_span_fits_l1(p);
    // Small products on several threads whose panels divide evenly take one share of whole
    // panels per thread (a task per thread), others for_grid's finer split (96^3: 3 panels).
    const bool column_slices = small && ceil_div(p.n, kt.nr) % threads == 0;
    return gemm_unpacked_a(deep_small ? *kt.deep : kt, p, parallel, column_slices);
  }
  const GemmKernels& blocked = blocked_kernels(kt, p.k, p.n);
  const bool wide_slices = threads <= kMaxColumnSlices && p.n >= int64_t(4) * blocked.nr * threads;
  // A slice per thread needs a panel per thread (n = 64 on the deep tile is one): else rows split.
  if (threads > 1 && (mid || wide_slices) && ceil_div(p.n, blocked.nr) >= threads)
    return gemm_column_split(blocked, p);
  return gemm_blocked(blocked, p, parallel);
}

}  // namespace tessera::detail
