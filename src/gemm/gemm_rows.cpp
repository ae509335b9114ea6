// The few-row executors: A's rows times B^T as dot products (K read in place), and times B in
// place through the wide kernels, by columns, by fixed chunks of k, or with B streamed row by
// row. Plans come from src/gemm/gemm_plan.cpp.
#include <algorithm>
#include <atomic>

#include "gemm/gemm_plan.hpp"
#include "gemm/gemm_rows.hpp"
#include "gemm/gemm_split.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"

namespace tessera::detail {

using arch::GemmKernels;
using namespace gemm_split;

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
// A B past the tuning row's stream_b_bytes is streamed row by row instead (gemm_rows_stream.hpp),
// each thread's columns over blocks of 8 rows of k: whole 4 KB rows of B are read in turn, where
// the strips read 256 bytes of every row and ran at ~12 GB/s from L3. 4 x 1024 x 1024 (B 4 MB),
// medians of 5, GFLOP/s strips -> rows (oneDNN in the same run): 1 thread 23.6 -> 57.0 (44.5), 2
// threads 48.3 -> 88.7 (76.2). The sums are the wide kernels' (one accumulator, k in order).
// A narrow B (rows of at most kNarrowRowFloats) is split along k instead, at fixed positions
// (chunks of kWideKChunk rows: a function of k alone, never of the thread count, as the fused
// attention's decode chunks are): each chunk's sums go to a partial m x n block, and the blocks
// are added in chunk order, so C is the same for any number of threads. Split by columns, each
// thread read every B row in part (1 x 128 x 4096: 256 of each 512 bytes) and the hardware
// prefetchers fetched the other thread's lines as well; split by k, each thread streams one
// contiguous range. Two threads on 1 x 128 x 4096, standalone loops, medians of 20000 calls:
// 17.2 us by columns, 9.6 us by k (oneDNN: 11.1 us).
// The zero-padded panel of a task for arch::wide_rows' columns past the last whole vector of n,
// one chunk of k deep (none when n is whole vectors).
static size_t k_chunk_panel_floats(const GemmKernels& kt, const GemmProblem& p) {
  return p.n % kt.simd_floats != 0 ? size_t(kWideKChunk * kt.nr) : 0;
}

size_t gemm_wide_k_chunks_serial_floats(const GemmKernels& kt, const GemmProblem& p) {
  return line_floats(size_t(ceil_div(p.k, kWideKChunk) * p.m * p.n)) + k_chunk_panel_floats(kt, p);
}

Status gemm_wide_k_chunks(const GemmKernels& kt, const GemmProblem& p, bool parallel,
                          bool b_streams, float* given) {
  const int64_t chunks = ceil_div(p.k, kWideKChunk), block = p.m * p.n;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  // The partial sums, then each task's panel, all reserved before any task runs.
  float* partial =
      given ? given : thread_scratch(ScratchSlot::gemm_a).floats(size_t(chunks * block));
  if (!partial) return fail(Status::out_of_memory, "cannot allocate the partial sums");
  TaskScratch panels;
  if (!panels.reserve(k_chunk_panel_floats(kt, p), parallel,
                      given ? given + line_floats(size_t(chunks * block)) : nullptr))
    return fail(Status::out_of_memory, "cannot allocate the packed B panels");
  thread_slices(chunks, parallel, [&](int64_t c0, int64_t c1, bool) {
    panels.with_slice([&](float* panel) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k0 = c * kWideKChunk;
        arch::wide_rows(kt, p.m, std::min(kWideKChunk, p.k - k0), p.a + k0 * a_cs, a_rs, a_cs,
                        p.b + k0 * p.ldb, p.ldb, partial + c * block, p.n, p.n, 1.0f, 0.0f, panel,
                        b_streams);
      }
    });
  });
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

// stream: B streamed row by row (gemm_rows_stream.hpp) rather than walked in strips.
// A task's sums (streamed B: r x its whole vectors), then its zero-padded panel for the columns
// past the last whole vector.
static size_t wide_acc_floats(const GemmKernels& kt, const GemmProblem& p, bool parallel,
                              bool stream) {
  const int64_t W = kt.simd_floats, vectors = p.n / W;
  const int threads = parallel ? tbb::this_task_arena::max_concurrency() : 1;
  const int64_t share =
      ceil_div(vectors, std::max<int64_t>(1, std::min<int64_t>(threads, vectors)));
  return stream ? line_floats(size_t(p.m * share * W)) : 0;
}

size_t gemm_wide_floats(const GemmKernels& kt, const GemmProblem& p, bool parallel, bool stream) {
  return wide_acc_floats(kt, p, parallel, stream) +
         (p.n % kt.simd_floats != 0 ? size_t(p.k * kt.nr) : 0);
}

Status gemm_wide(const GemmKernels& kt, const GemmProblem& p, bool parallel, bool stream,
                 float* given) {
  const int64_t W = kt.simd_floats, vectors = p.n / W;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  // Reserved before any task writes C.
  const size_t acc_floats = wide_acc_floats(kt, p, parallel, stream);
  TaskScratch scratch;
  if (!scratch.reserve(gemm_wide_floats(kt, p, parallel, stream), parallel, given))
    return fail(Status::out_of_memory, "cannot allocate a packed B panel or the sums");
  // Vectors [v0, v1), and the columns past the last whole vector with the last slice.
  auto columns = [&](int64_t v0, int64_t v1, bool tail, float* buf) {
    int64_t n = tail ? p.n - v0 * W : (v1 - v0) * W, j0 = v0 * W;
    if (stream && v1 > v0) {
      const int64_t whole = (v1 - v0) * W;
      kt.rows_stream[p.m](p.k, p.a, a_rs, a_cs, p.b + j0, p.ldb, buf, p.c + j0, p.ldc, whole,
                          p.alpha, p.beta);
      j0 += whole, n -= whole;
      if (n == 0) return;
    }
    float* panel = n % W != 0 ? buf + acc_floats : nullptr;
    arch::wide_rows(kt, p.m, p.k, p.a, a_rs, a_cs, p.b + j0, p.ldb, p.c + j0, p.ldc, n, p.alpha,
                    p.beta, panel);
  };
  thread_slices(vectors, parallel, [&](int64_t v0, int64_t v1, bool tail) {
    scratch.with_slice([&](float* buf) { columns(v0, v1, tail, buf); });
  });
  return Status::ok;
}

// ---- a few rows of A times a prepacked B: the row-panel kernels ----------------------------
// A prepared layer's decode step: its weights are packed once, and a few tokens' projections
// read them. Each thread takes a contiguous share of the panels (whole groups of the kernel's
// panels read at once) and runs every KC block over it, so no fork-join per block; every C
// element is one accumulator summing each KC block in order, then the blocks in order: the
// blocked path's sums, on any split.
void gemm_prepacked_row(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  const int r = int(p.m);
  const int64_t NR = kt.nr, KC = kt.kc;
  const int64_t G = arch::row_panels_group(kt, r);
  const int64_t panels = ceil_div(p.n, NR), n_padded = panels * NR;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  thread_slices(ceil_div(panels, G), parallel, [&](int64_t g0, int64_t g1, bool) {
    const int64_t q0 = g0 * G, q1 = std::min(panels, g1 * G);
    const int64_t cols = std::min(p.n, q1 * NR) - q0 * NR;
    for (int64_t pc = 0; pc < p.k; pc += KC) {
      const int64_t kc = std::min(KC, p.k - pc);
      const int64_t at = pc * n_padded + q0 * NR * kc;
      const float beta = pc == 0 ? p.beta : 1.0f;
      if (p.b_packed)
        kt.row_panels[r](kc, p.a + pc * a_cs, a_rs, a_cs, p.b_packed + at, q1 - q0, p.c + q0 * NR,
                         p.ldc, cols, p.alpha, beta);
      else
        kt.row_panels16[p.b16][r](kc, p.a + pc * a_cs, a_rs, a_cs, p.b_packed16 + at, q1 - q0,
                                  p.c + q0 * NR, p.ldc, cols, p.alpha, beta);
    }
  });
}

}  // namespace tessera::detail
