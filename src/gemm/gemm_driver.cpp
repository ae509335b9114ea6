#include "gemm/gemm_driver.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>

#include "gemm/gemm_plan.hpp"
#include "gemm/gemm_rows.hpp"
#include "gemm/gemm_split.hpp"
#include "runtime/error.hpp"
#include "runtime/scratch.hpp"

namespace tessera::detail {
namespace {

using arch::GemmKernels;
using namespace gemm_split;

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

// ---- A read in place (no packing of A): few rows, small and mid-size products -----------------
// column_slices: on several threads, one fixed share of the column panels per thread, all rows
// (small products: fewer, larger tasks than for_grid's 2-D split; see gemm_run).
// A task's packed B panel (none when every panel is read in place).
size_t unpacked_a_floats(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p) {
  return !unpacked_b_in_place(kt, tn, p) || p.n % kt.nr != 0 ? size_t(kt.nr * p.k) : 0;
}

Status gemm_unpacked_a(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p, bool parallel,
                       bool column_slices, float* given) {
  const int64_t MR = kt.mr, NR = kt.nr;
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  const int64_t panels = ceil_div(p.n, NR);
  // B panels in place (unpacked_b_in_place) or packed a panel at a time by the task that uses
  // them, so that no packing step of its own (a fork-join) comes before the products.
  const bool b_in_place = unpacked_b_in_place(kt, tn, p);
  TaskScratch scratch;
  if (!scratch.reserve(unpacked_a_floats(kt, tn, p), parallel, given))
    return fail(Status::out_of_memory, "cannot allocate the packed B panels");
  // Column panels split first: a task then packs only the panels it uses.
  const auto tiles = [&](int64_t q0, int64_t q1, int64_t ib0, int64_t ib1, float* buf) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j = q * NR, nr = std::min(NR, p.n - j);
      const float* b = p.b + j;
      int64_t ldb = p.ldb;
      if (!b_in_place || nr < NR) {
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
  const auto body = [&](int64_t q0, int64_t q1, int64_t ib0, int64_t ib1) {
    scratch.with_slice([&](float* buf) { tiles(q0, q1, ib0, ib1, buf); });
  };
  if (parallel && column_slices)
    thread_slices(panels, true,
                  [&](int64_t q0, int64_t q1, bool) { body(q0, q1, 0, ceil_div(p.m, MR)); });
  else
    for_grid(panels, ceil_div(p.m, MR), parallel, body);
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

// A product through the small tiles, in the form the plan chose (gemm_plan.cpp).
size_t small_tiles_floats(const GemmKernels& kt, const GemmProblem& p, SmallTiles form) {
  return form == SmallTiles::b_in_place ? 0 : size_t(kt.small_cols * p.k);
}

Status gemm_small_tiles(const GemmKernels& kt, const GemmProblem& p, SmallTiles form, bool parallel,
                        float* given) {
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
  TaskScratch scratch;
  if (!scratch.reserve(small_tiles_floats(kt, p, form), parallel, given))
    return fail(Status::out_of_memory, "cannot allocate the packed B panels");
  thread_slices(ceil_div(p.n, NS), parallel, [&](int64_t q0, int64_t q1, bool) {
    scratch.with_slice([&](float* panel) {
      for (int64_t j = q0 * NS; j < std::min(p.n, q1 * NS); j += NS) {
        const int64_t nr = std::min(NS, p.n - j);
        kt.pack_b_small(p.tb, p.k, nr, p.tb ? p.b + j * p.ldb : p.b + j, p.ldb, panel);
        small_column(kt, p, a_rs, a_cs, 0, p.m, panel, NS, p.c + j, nr);
      }
    });
  });
  return Status::ok;
}

// ---- the blocked path: pack A blocks and B blocks, micro-kernels over the packed panels --------
// The scratch of a serial blocked product: its packed B block, then one packed A block (an
// upper bound for any n up to p.n: A packed or not).
size_t blocked_serial_floats(const GemmKernels& kt, const GemmProblem& p) {
  const int64_t NR = kt.nr, KC = kt.kc, kc = std::min(KC, p.k);
  const int64_t b = p.b_packed ? 0 : kc * std::min(round_up(kt.nc, NR), round_up(p.n, NR));
  const int64_t row_panels = ceil_div(p.m, kt.mr);
  const int64_t row_blocks =
      std::min(row_panels, std::max(ceil_div(p.m, int64_t(kt.mc)), int64_t(2)));
  return size_t(b + ceil_div(row_panels, row_blocks) * kt.mr * kc);
}

// Row blocks: at most MC rows each, at least two per thread, their count a multiple of the
// thread count, and the MR panels dealt out evenly among them, so that threads split rows
// (each packs its A block once, rather than splitting N and re-packing A per chunk) and finish
// together (blocks of MC = 336 rows made 7 blocks of 2048 rows: 4 + 3 on 2 threads). Blocks
// only partition rows: the sums, and so the results, do not depend on them.
struct RowBlocks {
  int64_t m, row_panels, count, mc_max;
  RowBlocks(const GemmKernels& kt, int64_t m_, int threads)
      : m(m_),
        row_panels(ceil_div(m_, kt.mr)),
        count(std::min(row_panels,
                       round_up(std::max(ceil_div(m_, int64_t(kt.mc)), int64_t(2) * threads),
                                int64_t(threads)))),
        mc_max(ceil_div(row_panels, count) * kt.mr) {}
  // Block ib: rows [first_row(ib), first_row(ib + 1)).
  int64_t first_row(int64_t ib, int64_t MR) const {
    return std::min(m, ib * row_panels / count * MR);
  }
};

// One KC x NC block of the product: B's block (packed, prepacked or widened) at bp, k rows
// [pc, pc + kc) and columns [jc, jc + nc), and how its tiles go.
struct BlockedStep {
  const GemmKernels& kt;
  const GemmProblem& p;
  const RowBlocks& rb;
  BlockedChoices choice;
  int64_t a_rs, a_cs, jc, nc, pc, kc;
  float beta;
  const float* bp;
};

// B's KC x NC block as the kernels read it: a prepacked block in place; 16-bit panels widened
// into float32 ones of the same layout, once, shared by every task (O(kc nc) conversions against
// O(m kc nc) products); otherwise op(B) packed once, shared likewise.
const float* b_block(const GemmKernels& kt, const GemmProblem& p, int64_t jc, int64_t nc,
                     int64_t pc, int64_t kc, bool parallel, float* b_buf) {
  const int64_t NR = kt.nr, panels = ceil_div(nc, NR);
  const int64_t at = pc * round_up(p.packed_n ? p.packed_n : p.n, NR) + (p.packed_j0 + jc) * kc;
  if (p.b_packed) return p.b_packed + at;
  if (p.b_packed16) {
    const uint16_t* src = p.b_packed16 + at;
    for_grid(1, panels, parallel, [&](int64_t, int64_t, int64_t q0, int64_t q1) {
      p.b16_widen((q1 - q0) * NR * kc, src + q0 * NR * kc, b_buf + q0 * NR * kc);
    });
    return b_buf;
  }
  for_grid(1, panels, parallel, [&](int64_t, int64_t, int64_t q0, int64_t q1) {
    const int64_t j = jc + q0 * NR, cols = std::min(q1 * NR, nc) - q0 * NR;
    const float* src = p.tb ? p.b + j * p.ldb + pc : p.b + pc * p.ldb + j;
    kt.pack_b(p.tb, kc, cols, src, p.ldb, b_buf + q0 * NR * kc);
  });
  return b_buf;
}

// Tile (q, ir) of row block ib (rows from ic, A at a, packed or in place): B panel q, the MR
// rows from ir (fewer in a partial tile, which is alone); whole tiles go as a run of `count`
// from it, along a row of tiles (across B panels) or down a column (across A panels).
void blocked_tiles(const BlockedStep& s, int64_t ib, int64_t ib1, int64_t q0, int64_t q1,
                   int64_t ic, int64_t mc, const float* a_base, int64_t q, int64_t ir,
                   int64_t count, bool along_row) {
  const GemmKernels& kt = s.kt;
  const GemmProblem& p = s.p;
  const int64_t MR = kt.mr, NR = kt.nr, kc = s.kc;
  const bool pack_a = s.choice.pack_a;
  const int64_t j = s.jc + q * NR, nr = std::min(NR, p.n - j);
  const int64_t rows = std::min(MR, mc - ir);
  const float* b_panel = s.bp + q * NR * kc;
  float* c = p.c + (ic + ir) * p.ldc + j;
  const float* a = pack_a ? a_base + ir * kc : a_base + ir * s.a_rs;
  if (rows < MR) {
    if (pack_a)
      kt.packed[rows](kc, a, b_panel, c, p.ldc, nr, p.alpha, s.beta);
    else
      kt.strided[rows](kc, a, s.a_rs, s.a_cs, b_panel, NR, c, p.ldc, nr, p.alpha, s.beta);
    return;
  }
  arch::TileRun run = along_row
                          ? arch::TileRun{count, 0, NR * kc, NR}
                          : arch::TileRun{count, pack_a ? MR * kc : MR * s.a_rs, 0, MR * p.ldc};
  if (!along_row) {
    // Down a column the run reuses one B micro-panel; the next one (the next column, or the
    // first of the next row block) was last read a whole B block ago and comes from L3, and
    // the first tile to read it, left to the kernel's prefetches, ran several times slower than
    // the others. The run brings it into L2 meanwhile.
    const int64_t next = q + 1 < q1 ? q + 1 : ib + 1 < ib1 ? q0 : -1;
    if (next >= 0) {
      run.l2_next = s.bp + next * NR * kc;
      run.l2_lines = ceil_div(NR * kc / arch::kLineFloats, count);
    }
    run.a_next = s.choice.a_next;
  }
  if (pack_a)
    kt.packed_run(run, kc, a, b_panel, c, p.ldc, nr, p.alpha, s.beta);
  else
    kt.strided_run(run, kc, a, s.a_rs, s.a_cs, b_panel, NR, c, p.ldc, nr, p.alpha, s.beta);
}

// Row blocks [ib0, ib1) against B panels [q0, q1) of one KC x NC block: each A block packed
// (or read in place), then its tiles row by row or column by column as the plan chose. Runs
// take whole tiles only: the panels with all NR columns, the rows of whole MR.
void blocked_row_blocks(const BlockedStep& s, int64_t ib0, int64_t ib1, int64_t q0, int64_t q1,
                        float* a_buf) {
  const GemmProblem& p = s.p;
  const int64_t MR = s.kt.mr, NR = s.kt.nr;
  for (int64_t ib = ib0; ib < ib1; ++ib) {
    const int64_t ic = s.rb.first_row(ib, MR), mc = s.rb.first_row(ib + 1, MR) - ic;
    const float* a_src = p.ta ? p.a + s.pc * p.lda + ic : p.a + ic * p.lda + s.pc;
    if (s.choice.pack_a) s.kt.pack_a(p.ta, mc, s.kc, a_src, p.lda, a_buf);
    const float* a_base = s.choice.pack_a ? a_buf : a_src;
    const auto tiles = [&](int64_t q, int64_t ir, int64_t count, bool along_row) {
      blocked_tiles(s, ib, ib1, q0, q1, ic, mc, a_base, q, ir, count, along_row);
    };
    const int64_t whole_q1 = std::max(q0, std::min(q1, s.nc / NR)), whole_rows = mc / MR * MR;
    if (s.choice.rows_outer) {
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
}

// given: a serial product's scratch (blocked_serial_floats), reserved by the caller; else B's
// block comes from the calling thread's scratch and each task's A block from TaskScratch.
Status gemm_blocked(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p, bool parallel,
                    float* given = nullptr) {
  const int64_t NR = kt.nr, KC = kt.kc, NC = kt.nc;
  const RowBlocks rb(kt, p.m, parallel ? tbb::this_task_arena::max_concurrency() : 1);
  const BlockedChoices choice = plan_blocked(kt, tn, p);
  const size_t b_floats =
      p.b_packed ? 0 : size_t(std::min(KC, p.k) * std::min(round_up(NC, NR), round_up(p.n, NR)));
  float* b_buf = given;
  TaskScratch a_scratch;
  if (!given) {
    if (b_floats > 0 && !(b_buf = thread_scratch(ScratchSlot::gemm_b).floats(b_floats)))
      return fail(Status::out_of_memory, "cannot allocate the packed B block");
    if (!a_scratch.reserve(choice.pack_a ? size_t(rb.mc_max * std::min(KC, p.k)) : 0, parallel))
      return fail(Status::out_of_memory, "cannot allocate the packed A blocks");
  }
  const int64_t a_rs = p.ta ? 1 : p.lda, a_cs = p.ta ? p.lda : 1;
  for (int64_t jc = 0; jc < p.n; jc += NC) {
    const int64_t nc = std::min(NC, p.n - jc);
    for (int64_t pc = 0; pc < p.k; pc += KC) {
      const int64_t kc = std::min(KC, p.k - pc);
      const BlockedStep s{kt,
                          p,
                          rb,
                          choice,
                          a_rs,
                          a_cs,
                          jc,
                          nc,
                          pc,
                          kc,
                          pc == 0 ? p.beta : 1.0f,
                          b_block(kt, p, jc, nc, pc, kc, parallel, b_buf)};
      for_grid(rb.count, ceil_div(nc, NR), parallel,
               [&](int64_t ib0, int64_t ib1, int64_t q0, int64_t q1) {
                 if (given)
                   blocked_row_blocks(s, ib0, ib1, q0, q1, given + b_floats);
                 else
                   a_scratch.with_slice(
                       [&](float* a_buf) { blocked_row_blocks(s, ib0, ib1, q0, q1, a_buf); });
               });
    }
  }
  return Status::ok;
}

}  // namespace

size_t gemm_packed_b_floats(const GemmKernels& table, int64_t k, int64_t n) {
  return size_t(k) * size_t(round_up(n, blocked_kernels(table, k, n).nr));
}

void gemm_pack_b16_full(const GemmKernels& table, bool tb, int64_t k, int64_t n, const uint16_t* b,
                        int64_t ldb, uint16_t* out) {
  const GemmKernels& kt = blocked_kernels(table, k, n);
  const int64_t NR = kt.nr, n_padded = round_up(n, NR);
  for (int64_t pc = 0; pc < k; pc += kt.kc) {
    const int64_t kc = std::min<int64_t>(kt.kc, k - pc);
    uint16_t* block = out + pc * n_padded;
    for (int64_t q = 0; q < n_padded / NR; ++q)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t c = 0; c < NR; ++c) {
          const int64_t j = q * NR + c;
          block[(q * kc + p) * NR + c] =
              j < n ? (tb ? b[j * ldb + pc + p] : b[(pc + p) * ldb + j]) : uint16_t(0);
        }
  }
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
// B prepacked in 16 bits goes the same way (a slice's panels found by packed_j0): each thread
// widens only its own panels, in its own cache, with no fork-join per KC block.
// The sums are those of the blocked path whatever the slicing: a C tile's k loop never splits.
Status gemm_column_split(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p) {
  const int64_t panels = ceil_div(p.n, kt.nr);
  const int64_t slices = std::min<int64_t>(panels, tbb::this_task_arena::max_concurrency());
  // Every slice's scratch, reserved here before any slice writes C.
  GemmProblem widest = p;
  widest.n = std::min(p.n, ceil_div(panels, slices) * kt.nr);
  TaskScratch scratch;
  if (!scratch.reserve(blocked_serial_floats(kt, widest), true))
    return fail(Status::out_of_memory, "cannot allocate the packed blocks of the column slices");
  for_grid(slices, 1, true, [&](int64_t s0, int64_t s1, int64_t, int64_t) {
    scratch.with_slice([&](float* buf) {
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t j0 = panels * s / slices * kt.nr;
        const int64_t j1 = std::min(p.n, panels * (s + 1) / slices * kt.nr);
        GemmProblem slice = p;
        slice.n = j1 - j0;
        if (p.prepacked())  // its panels within the whole B's
          slice.packed_j0 = p.packed_j0 + j0, slice.packed_n = p.packed_n ? p.packed_n : p.n;
        else
          slice.b = p.tb ? p.b + j0 * p.ldb : p.b + j0;
        slice.c = p.c + j0;
        gemm_blocked(kt, tn, slice, false, buf);  // cannot fail with its scratch given
      }
    });
  });
  return Status::ok;
}

size_t gemm_serial_floats(const GemmPlan& plan, const GemmProblem& p) {
  const GemmKernels& kt = *plan.kernels;
  switch (plan.path) {
    case GemmPath::wide:
      return gemm_wide_floats(kt, p, false, plan.stream_b);
    case GemmPath::wide_k_chunks:
      return gemm_wide_k_chunks_serial_floats(kt, p);
    case GemmPath::small_tiles:
      return small_tiles_floats(kt, p, plan.small);
    case GemmPath::unpacked_a:
      return unpacked_a_floats(kt, *plan.tuning, p);
    case GemmPath::blocked:
      return blocked_serial_floats(kt, p);
    default:  // nothing, scale_c and dot take none; column_split is never serial
      return 0;
  }
}

Status gemm_execute(const GemmPlan& plan, const GemmProblem& p, float* given) {
  assert(!given || !plan.parallel);  // one buffer serves one task
  const GemmKernels& kt = *plan.kernels;
  const Tuning& tn = *plan.tuning;
  const bool parallel = plan.parallel;
  switch (plan.path) {
    case GemmPath::nothing:
      return Status::ok;
    case GemmPath::scale_c:
      scale_c(p, parallel);
      return Status::ok;
    case GemmPath::dot:
      gemm_dot(kt, p, parallel);
      return Status::ok;
    case GemmPath::wide:
      return gemm_wide(kt, p, parallel, plan.stream_b, given);
    case GemmPath::wide_k_chunks:
      return gemm_wide_k_chunks(kt, p, parallel, plan.b_streams, given);
    case GemmPath::small_tiles:
      return gemm_small_tiles(kt, p, plan.small, parallel, given);
    case GemmPath::unpacked_a:
      return gemm_unpacked_a(kt, tn, p, parallel, plan.column_slices, given);
    case GemmPath::column_split:
      return gemm_column_split(kt, tn, p);
    case GemmPath::blocked:
      return gemm_blocked(kt, tn, p, parallel, given);
    case GemmPath::prepacked_row:
      gemm_prepacked_row(kt, p, parallel);
      return Status::ok;
  }
  return Status::ok;
}

Status gemm_run(const GemmKernels& kt, const Tuning& tn, const GemmProblem& p, bool parallel) {
  return gemm_execute(plan_gemm(kt, tn, p, parallel, tbb::this_task_arena::max_concurrency()), p);
}

Status gemm_run(const GemmKernels& kt, const GemmProblem& p, bool parallel) {
  return gemm_run(kt, active_tuning(), p, parallel);
}

}  // namespace tessera::detail
