#include "gemm/gemm_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "runtime/arith.hpp"

namespace tessera::detail {
namespace {

using arch::GemmKernels;

constexpr const char* kPathNames[] = {"nothing",       "scale_c",      "dot",        "wide",
                                      "wide_k_chunks", "small_tiles",  "unpacked_a", "column_split",
                                      "blocked",       "prepacked_row"};

// Few rows times a narrow B (rows of at most this many floats) split along k (kWideKChunk):
// each thread streams one contiguous range of B, where split by columns each read part of every
// row and the hardware prefetchers fetched the other thread's lines as well.
constexpr int64_t kNarrowRowFloats = 256;

// Blocks of at most this many B panels read A in place: the kernel reads A in place nearly as
// fast as a packed panel, so packing pays only when a block is reused over enough panels
// (AVX-512, 1 thread, packed -> in place: 512^3 151 -> 156-161; 2048^3 -2%).
constexpr int64_t kMaxPanelsWithAInPlace = 16;

// Column slices on at most this many threads: each slice is one more read of all of A.
constexpr int kMaxColumnSlices = 4;

// Wide enough for a column slice per thread: 2 to kMaxColumnSlices threads, each with at least
// four of the tile's nr-column panels.
bool wide_column_slices(int threads, int64_t n, int64_t nr) {
  return threads > 1 && threads <= kMaxColumnSlices && n >= int64_t(4) * nr * threads;
}

// Products with at most this many multiply-adds are small (128^3).
constexpr double kSmallMacs = 128.0 * 128 * 128;

bool b_rows_aligned(const GemmProblem& p) {
  return !p.tb && reinterpret_cast<uintptr_t>(p.b) % 64 == 0 && p.ldb % 16 == 0;
}

// B not transposed, its k rows spanning at most L1: a B panel read in place stays in L1 across
// the row tiles whatever its alignment and stride, and packing it would cost more than its
// unaligned loads.
bool b_span_fits_l1(const Tuning& tn, const GemmProblem& p) {
  return !p.tb && 4.0 * double(p.k) * double(p.ldb) <= tn.l1_span_bytes;
}

// B in place needs whole panels and a B whose rows span L1; otherwise a panel packed (64 x 128
// x 4 B = 32 KB) is reused from L1 by all the rows, a panel at a time so that threads share
// the panels. B^T is always packed. Past the small products, k <= 128 with A in place within
// panels_a_in_place_bytes takes the packed panels too (BLIS's loops with NR = 64, KC = k),
// unless A is transposed (the tiles read A^T a strided row per k step) or the panels do not
// divide among the threads.
SmallTiles small_tiles_form(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p,
                            int threads, bool small) {
  if (!kt.small_run) return SmallTiles::none;
  const int64_t NS = kt.small_cols;
  const bool panels_per_thread = ceil_div(p.n, NS) % threads == 0;
  const bool panel_fits_l1 = 4.0 * double(p.k) * double(NS) <= tn.l1_span_bytes;
  if (!small)
    return !p.ta && panel_fits_l1 && panels_per_thread &&
                   4.0 * double(p.m) * double(p.k) <= tn.panels_a_in_place_bytes
               ? SmallTiles::b_panels
               : SmallTiles::none;
  if (p.tb) return panels_per_thread ? SmallTiles::b_panels : SmallTiles::none;
  if (!tn.small_b_in_place || p.n % NS != 0) return SmallTiles::none;
  if (b_span_fits_l1(tn, p)) return SmallTiles::b_in_place;
  return panel_fits_l1 && panels_per_thread ? SmallTiles::b_panels : SmallTiles::none;
}

GemmPlan make(GemmPath path, const char* rule, const GemmKernels& kt, const Tuning& tn,
              bool parallel, int threads) {
  GemmPlan plan;
  plan.path = path, plan.rule = rule, plan.kernels = &kt, plan.tuning = &tn;
  plan.parallel = parallel, plan.threads = threads;
  return plan;
}

}  // namespace

const char* gemm_path_name(GemmPath p) { return kPathNames[static_cast<size_t>(p)]; }

// The deep tile also takes narrow products of whole deep panels (P V, a head's values): with
// one or two MR x NR panels the driver reads A in place, and 14 rows lda apart share one L1 set
// when lda is a multiple of 1024 floats, where the deep tile's 6 rows fit the ways.
const GemmKernels& blocked_kernels(const GemmKernels& kt, int64_t k, int64_t n) {
  if (kt.deep == nullptr || k <= 128) return kt;
  const int64_t deep_nr = kt.deep->nr;
  return n >= 4 * deep_nr || n % deep_nr == 0 ? *kt.deep : kt;
}

BlockedChoices plan_blocked(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p) {
  BlockedChoices b;
  b.pack_a = ceil_div(std::min<int64_t>(kt.nc, p.n), kt.nr) > kMaxPanelsWithAInPlace;
  b.a_next = !b.pack_a && !p.ta && ceil_div(p.n, kt.nr) <= 2 &&
             4.0 * double(p.m) * double(p.k) > tn.a_stream_bytes;
  // BLIS's order walks down C's rows; with k <= 128 writing C dominates, and the MR panels go
  // outside so that successive tiles continue the same rows (Q K^T 4096 x 4096 x 64 on 1
  // thread: ~80 -> ~135 GFLOP/s).
  b.rows_outer = std::min<int64_t>(kt.kc, p.k) <= 128;
  return b;
}

// The rules, first match wins.
GemmPlan plan_gemm(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p, bool parallel,
                   int arena_threads) {
  if (p.m == 0 || p.n == 0) return make(GemmPath::nothing, "empty", kt, tn, false, 1);
  // Below min_parallel_macs (more with few rows) a fork-join costs more than a second core
  // saves, unless the operands are large enough that reading them bounds the product (decode's
  // 1 x 4096 x 128 reads 2 MB), where a second core adds bandwidth. Speed only: no split
  // changes the sums.
  const double operand_bytes = 4.0 * (double(p.m) * p.k + double(p.k) * p.n);
  const bool few_rows = p.m <= 2 * kt.dot_rows;
  const double macs = double(p.m) * p.n * p.k;
  if (macs < (few_rows ? tn.min_parallel_macs_few_rows : tn.min_parallel_macs) &&
      operand_bytes < tn.min_parallel_operand_bytes)
    parallel = false;
  const int threads = parallel ? arena_threads : 1;
  if (p.alpha == 0.0f || p.k == 0)
    return make(GemmPath::scale_c, "alpha-or-k-zero", kt, tn, parallel, threads);
  // A prepacked B follows the blocked path's KC blocks; one row reads several of its panels at
  // once (one panel at a time, the 1 x NR tile streamed a prepared layer's 16 MB weight at ~60%
  // of the rate of four: AVX2, 1 thread). B packed in 16 bits takes the row kernels for every
  // row count they have, which widen as they load: the blocked path widens each block into
  // memory first, and ran 2-4 rows x 2048 x 2048 at the float32 speed, the row kernels at
  // 2.5-3.4x it (AVX2, 1 and 2 threads). Float32 rows past one keep the blocked tiles.
  const GemmKernels& packed_kt = blocked_kernels(kt, p.k, p.n);
  if (p.prepacked() && p.m <= (p.b_packed16 ? packed_kt.row_panels_rows : 1)) {
    GemmPlan plan =
        make(GemmPath::prepacked_row, "prepacked-b-few-rows", packed_kt, tn, parallel, threads);
    if (p.b_packed16) plan.b16 = p.b16 ? "_b_bf16" : "_b_f16";
    return plan;
  }
  // 16-bit panels are widened a KC block at a time. Shared by the threads, each block took a
  // fork-join of its own, and half of it was then read from the other core's cache; in column
  // slices each thread widens its own panels (float32 panels are read in place: shared).
  if (p.b_packed16 && wide_column_slices(threads, p.n, packed_kt.nr))
    return make(GemmPath::column_split, "prepacked-b16-column-slices", packed_kt, tn, parallel,
                threads);
  if (p.prepacked())
    return make(GemmPath::blocked, "prepacked-b", packed_kt, tn, parallel, threads);
  // Few rows: pack nothing of A. B^T is read as dot products along k; B by the wide kernels.
  if (few_rows && p.tb && !p.ta)
    return make(GemmPath::dot, "few-rows-b-trans", kt, tn, parallel, threads);
  if (few_rows && !p.tb && p.m <= arch::kMaxWideRows) {
    if (p.n <= kNarrowRowFloats && p.k >= 2 * kWideKChunk) {
      GemmPlan plan =
          make(GemmPath::wide_k_chunks, "few-rows-narrow-b-k-chunks", kt, tn, parallel, threads);
      // A thread's share of B past L2 streams from L3 or memory: the prefetching kernels.
      const int64_t chunks = ceil_div(p.k, kWideKChunk);
      const double share = 4.0 * double(ceil_div(chunks, threads) * kWideKChunk) * double(p.n);
      plan.b_streams = tn.prefetch_streamed_b && share > tn.l2_reuse_bytes;
      return plan;
    }
    const bool stream = 4.0 * double(p.k) * double(p.n) > tn.stream_b_bytes;
    GemmPlan plan = make(GemmPath::wide, stream ? "few-rows-b-streamed" : "few-rows-b", kt, tn,
                         parallel, threads);
    plan.stream_b = stream;
    return plan;
  }
  const bool small = macs <= kSmallMacs;
  const bool mid = !small && p.k > 128 && operand_bytes <= tn.mid_operand_bytes;
  if (const SmallTiles form =
          few_rows && !small ? SmallTiles::none : small_tiles_form(kt, tn, p, threads, small);
      form != SmallTiles::none) {
    GemmPlan plan = make(GemmPath::small_tiles,
                         !small                           ? "short-k-small-tile-panels"
                         : form == SmallTiles::b_in_place ? "small-tiles-b-in-place"
                                                          : "small-tiles-b-panels",
                         kt, tn, parallel, threads);
    plan.small = form;
    return plan;
  }
  // A read in place: few rows (packing A would cost as much as the product); small products on
  // several threads (no packing fork-join before a ~20 us product) or with B within L1; mid-size
  // products within mid_in_place_bytes (no packing, one pass over C).
  const bool b_in_l1 = b_span_fits_l1(tn, p);
  if (few_rows || (small && (parallel || b_in_l1)) ||
      (mid && operand_bytes <= tn.mid_in_place_bytes)) {
    // A small product on one thread with B past L1 reads A in place faster with the deep tile.
    const bool deep_small = kt.deep != nullptr && small && !few_rows && threads == 1 && !b_in_l1;
    GemmPlan plan = make(GemmPath::unpacked_a,
                         few_rows     ? "few-rows-a-in-place"
                         : deep_small ? "small-deep-tile-a-in-place"
                         : small      ? "small-a-in-place"
                                      : "mid-a-in-place",
                         deep_small ? *kt.deep : kt, tn, parallel, threads);
    // Small products whose panels divide among the threads: one share of whole panels each.
    plan.column_slices = small && ceil_div(p.n, kt.nr) % threads == 0;
    return plan;
  }
  const GemmKernels& blocked = blocked_kernels(kt, p.k, p.n);
  // A slice per thread needs a panel per thread; else rows split.
  if (threads > 1 && (mid || wide_column_slices(threads, p.n, blocked.nr)) &&
      ceil_div(p.n, blocked.nr) >= threads)
    return make(GemmPath::column_split, mid ? "mid-column-slices" : "large-column-slices", blocked,
                tn, parallel, threads);
  return make(GemmPath::blocked, "blocked", blocked, tn, parallel, threads);
}

void gemm_kernel_names(const GemmPlan& plan, int64_t m, const char* isa, char* out, size_t size) {
  const GemmKernels& k = *plan.kernels;
  switch (plan.path) {
    case GemmPath::nothing:
    case GemmPath::scale_c:
      std::snprintf(out, size, "none");
      return;
    case GemmPath::dot:
      std::snprintf(out, size, "f32_gemm_dot_%dx%d_%s", k.dot_rows, k.dot_cols[k.dot_rows], isa);
      return;
    case GemmPath::wide:
    case GemmPath::wide_k_chunks:
      std::snprintf(out, size, "f32_gemm_wide_%lldxv_%s%s", (long long)m, isa,
                    plan.stream_b    ? "+f32_gemm_rows_stream"
                    : plan.b_streams ? "_prefetch_b"
                                     : "");
      return;
    case GemmPath::small_tiles:
      std::snprintf(out, size, "f32_gemm_%dx%d_%s", k.small_rows, k.small_cols, isa);
      return;
    case GemmPath::prepacked_row:
      std::snprintf(out, size, "f32_gemm_row_panels%s_nr%d_%lldx%d_%s", plan.b16, k.nr,
                    (long long)m, arch::row_panels_group(k, int(m)) * k.nr, isa);
      return;
    default:
      std::snprintf(out, size, "f32_gemm_%dx%d_%s", k.mr, k.nr, isa);
      return;
  }
}

// B panels read in place by unpacked_a: 64-byte aligned rows (a line-straddling load costs
// two), rows within L1, or one row panel (each panel used once).
bool unpacked_b_in_place(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p) {
  return !p.tb && (b_rows_aligned(p) || b_span_fits_l1(tn, p) || p.m <= kt.mr);
}

}  // namespace tessera::detail
