// SGEMM against the reference on every kernel table: the edge lattice of m, n, k, all four
// transposes, alpha/beta combinations, wide leading dimensions, batches and prepacked B.
#include <tbb/task_arena.h>

#include <gtest/gtest-spi.h>

#include <cstring>
#include <utility>

#include "gemm_tester.hpp"
#include "src/runtime/dispatch.hpp"

using tessera::Transpose;

namespace {

constexpr Transpose kTrans[] = {Transpose::no_trans, Transpose::trans};

// Sizes around every register-tile width the tables use (MR/NR in 4..32) and block edges.
const std::vector<int64_t> kEdges = {1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33, 47, 49};

class Gemm : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Gemm);

// Every transpose pair over the lattice ms x ns with k = k_of(m, n); alpha and beta cycle through
// their combinations so that every shape sees a different one, every third with padded leading
// dimensions.
template <class KOf>
void sweep_lattice(const std::vector<int64_t>& ms, const std::vector<int64_t>& ns, KOf k_of) {
  const float alphas[] = {1.0f, -0.5f, 1.0f, 0.0f};
  const float betas[] = {0.0f, 1.0f, 0.3f, 0.3f};
  int combo = 0;
  for (Transpose ta : kTrans)
    for (Transpose tb : kTrans)
      for (int64_t m : ms)
        for (int64_t n : ns) {
          GemmTester()
              .m(m)
              .n(n)
              .k(k_of(m, n))
              .ta(ta)
              .tb(tb)
              .alpha(alphas[combo % 4])
              .beta(betas[combo % 4])
              .pad(combo % 3 == 0 ? 3 : 0)
              .test(uint32_t(combo));
          ++combo;
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST_P(Gemm, EdgeLatticeAllTransposes) {
  sweep_lattice(kEdges, kEdges,
                [](int64_t m, int64_t n) { return kEdges[(m * 7 + n * 3) % kEdges.size()]; });
}

TEST_P(Gemm, KSweep) {
  for (int64_t k = 1; k <= 80; ++k) {
    GemmTester().m(9).n(19).k(k).beta(k % 2 ? 0.0f : 1.0f).test(uint32_t(k));
    if (HasFatalFailure()) return;
  }
}

TEST_P(Gemm, KZeroScalesC) {
  for (float beta : {0.0f, 1.0f, 0.3f}) GemmTester().m(5).n(7).k(0).beta(beta).test();
}

TEST_P(Gemm, AttentionShapes) {
  GemmTester().m(1).n(300).k(128).test();  // decode GEMV
  // Decode's q K^T, whose one-row kernel has k = 64 and 128 unrolled (gemm_dot_nt_row_k).
  GemmTester().m(1).n(300).k(128).tb(Transpose::trans).beta(0.3f).pad(3).test();
  GemmTester().m(1).n(77).k(64).tb(Transpose::trans).alpha(-0.5f).test();
  // A few rows (GQA decode's S): the R x 4 dot kernel, also unrolled at k = 64 and 128.
  GemmTester().m(3).n(50).k(128).tb(Transpose::trans).beta(1.0f).test();
  GemmTester().m(4).n(33).k(64).tb(Transpose::trans).pad(2).test();
  GemmTester().m(64).n(64).k(64).tb(Transpose::trans).test();  // Q K^T
  // Decode's P V and other narrow B with a long k: k split at fixed chunks, partial sums added
  // in chunk order (a partial vector of columns, k past a chunk edge, alpha and beta applied
  // once at the end).
  GemmTester().m(1).n(128).k(4096).test();
  GemmTester().m(3).n(200).k(2049).alpha(-0.5f).beta(0.3f).pad(3).test();
  GemmTester().m(4).n(7).k(3000).ta(Transpose::trans).beta(1.0f).test();
  GemmTester().m(130).n(40).k(257).beta(1.0f).pad(5).test();                // odd blocks
  GemmTester().m(257).n(65).k(300).ta(Transpose::trans).beta(0.3f).test();  // past the KC edge
}

// One row against B^T (decode's q K^T) through the one-row run (gemm_dot_nt_row_run): k at the
// unrolled head dims (64, 128) and off them (100), contiguous rows (ldb = k: one loop, A loaded
// once) and padded ones (a kernel call per group), n of one group, a few, many, a column tail,
// on 1 and 2 threads (a contiguous run of groups per thread), the scalars of GemmTester::cycle
// (beta = 0 over a poisoned C among them).
TEST_P(Gemm, OneRowDotRuns) {
  for (int threads : {1, 2})
    tbb::task_arena(threads).execute([&] {
      int combo = 0;
      for (int64_t k : {64, 100, 128})
        for (int64_t n : {16, 80, 1024, 1029})
          for (int64_t pad : {0, 3}) {
            GemmTester()
                .m(1)
                .n(n)
                .k(k)
                .tb(Transpose::trans)
                .cycle(combo / 2)  // both paddings with the same scalars
                .pad(pad)
                .test(uint32_t(combo));
            ++combo;
            if (::testing::Test::HasFatalFailure()) return;
          }
    });
}

// The active table's own block edges: k across one and two KC blocks (C updated with beta = 1
// after the first), m across MC and uneven row blocks, k <= 128 (MR panels outside the NR
// panels), prepacked B over several KC blocks.
TEST_P(Gemm, BlockEdgesOfTheTable) {
  const auto& g = tessera::detail::active_table().gemm;
  const int64_t MR = g.mr, NR = g.nr, KC = g.kc, MC = g.mc;
  for (int64_t k : {KC - 1, KC, KC + 1, 2 * KC + 3}) {
    GemmTester().m(2 * MR + 3).n(NR + 5).k(k).beta(0.3f).test(uint32_t(k));
    GemmTester().m(MR + 1).n(3 * NR + 2).k(k).tb(Transpose::trans).packed(true).test();
    if (HasFatalFailure()) return;
  }
  for (int64_t m : {MC - 1, MC + 1, 2 * MC + MR + 1, 7 * MR + 3}) {
    GemmTester().m(m).n(5 * NR + 1).k(37).test(uint32_t(m));
    GemmTester().m(m).n(2 * NR + 1).k(129).ta(Transpose::trans).beta(1.0f).test();
    if (HasFatalFailure()) return;
  }
  // Short k past the small products, 4 panels per thread: column slices on 2 threads.
  GemmTester().m(100).n(8 * NR + 5).k(100).tb(Transpose::trans).beta(0.3f).test();
  // B not transposed with A and B past 4 MB (smaller ones are read in place): the blocked path
  // packs B itself, across the KC and MC edges.
  const int64_t n_blocked = (4 << 20) / (4 * (KC + 1)) + NR + 5;
  GemmTester().m(MC + 1).n(n_blocked).k(KC + 1).beta(0.3f).test();
}

// Blocked products with a deep k take the table's deep tile where it has one (AVX-512: 6 x 64;
// blocked_kernels), the table's own tile elsewhere: m across that tile's MR edges and one MC
// block, n past 4 panels across the NR edges, k just past 128 and across KC, all transposes
// (B^T and misaligned B are packed), column slices per thread, prepacked B in that tile's
// layout, then the small products that one thread runs on it.
TEST_P(Gemm, DeepTilesOfTheTable) {
  const auto& table = tessera::detail::active_table().gemm;
  const auto& g = table.deep != nullptr ? *table.deep : table;
  const int64_t MR = g.mr, NR = g.nr, KC = g.kc, MC = g.mc;
  sweep_lattice({2 * MR - 1, 2 * MR + 1, 3 * MR + 2, 4 * MR + 5}, {4 * NR, 4 * NR + 1, 5 * NR - 1},
                [&](int64_t m, int64_t n) { return (m + n) % 2 ? int64_t(129) : KC + 1; });
  GemmTester().m(MC + MR + 1).n(4 * NR + 3).k(2 * KC + 3).beta(0.3f).pad(2).test();
  // Past 4 MB with 4 panels per thread: column slices, one serial blocked product each.
  GemmTester().m(2 * MR + 3).n(8 * NR + 5).k(2 * KC + 3).alpha(-0.5f).beta(1.0f).test();
  for (int64_t k : {int64_t(129), KC - 1, 2 * KC + 1}) {
    GemmTester().m(2 * MR + 3).n(4 * NR + 5).k(k).packed(true).test(uint32_t(k));
    GemmTester().m(MR).n(6 * NR - 7).k(k).tb(Transpose::trans).packed(true).beta(1.0f).test();
    if (HasFatalFailure()) return;
  }
  // Narrow products of whole deep panels (P V: n = NR, 2 NR) take the same tile, rows split
  // across threads (one panel gives a column split nothing to share), B packed or prepacked.
  for (int64_t n : {NR, 2 * NR}) {
    GemmTester().m(MC + 2 * MR + 1).n(n).k(KC + 1).beta(0.3f).test();
    GemmTester().m(4 * MR + 1).n(n).k(2 * KC + 3).tb(Transpose::trans).packed(true).test();
    if (HasFatalFailure()) return;
  }
  // Small products on one thread with B past L1 read A in place with the same tile.
  tbb::task_arena(1).execute([&] {
    sweep_lattice({2 * MR - 1, 3 * MR + 2}, {NR + 1, 2 * NR - 1},
                  [](int64_t, int64_t) { return int64_t(100); });
  });
}

// Small products on one thread: B^T packed into panels of the small tile's width (AVX-512: 4 x
// 64) and runs of those tiles down each (the wide kernels for the rows past them); B in L1 read
// in place by the MR x NR tiles.
TEST_P(Gemm, SmallTilesOfTheTable) {
  const auto& g = tessera::detail::active_table().gemm;
  const int64_t R = g.small_rows > 0 ? g.small_rows : g.mr;
  const int64_t NS = g.small_cols > 0 ? g.small_cols : g.nr;
  sweep_lattice({3 * R, 3 * R + 1, 4 * R + 3, 16 * R + 2}, {NS - 1, NS, NS + 1, 2 * NS + 17},
                [](int64_t m, int64_t n) { return 1 + (m * 5 + n) % 40; });
}

// Small products through the small tiles in each of their forms (small_tiles_form in
// src/gemm/gemm_driver.cpp): B read in place (whole panels, k rows within L1, rows split across
// threads), B or B^T packed a panel at a time (panels split across threads), and the MR x NR
// tiles where neither applies (a partial panel of B, panels that do not divide among the
// threads, a packed panel past L1 at k = 200). Both values of the tuning row's small_b_in_place on
// every machine with small tiles (the AMD choice is tested on Intel too), on 1, 2 and 3 threads,
// every transpose, B 16 bytes past a line or on one, padded leading dimensions, beta = 0 over a
// poisoned C.
TEST_P(Gemm, SmallTilesEveryForm) {
  const auto& g = tessera::detail::active_table().gemm;
  if (g.small_run == nullptr) GTEST_SKIP() << "no small tiles in this table";
  const int64_t R = g.small_rows, NS = g.small_cols;
  for (bool in_place : {false, true}) {
    tessera::detail::Tuning tn = tessera::detail::active_tuning();
    tn.small_b_in_place = in_place;
    for (int threads : {1, 2, 3})
      tbb::task_arena(threads).execute([&] {
        int combo = 0;
        for (Transpose ta : kTrans)
          for (Transpose tb : kTrans)
            for (int64_t m : {R + 1, 3 * R + 2, 16 * R})
              for (int64_t n : {NS, 2 * NS, 3 * NS, 2 * NS + 5})
                for (int64_t k : {33, 100, 200}) {
                  if (double(m) * n * k > 128.0 * 128 * 128) continue;  // not small
                  GemmTester()
                      .kernels(&g)
                      .tuning(&tn)
                      .m(m)
                      .n(n)
                      .k(k)
                      .ta(ta)
                      .tb(tb)
                      .cycle(combo)
                      .test(uint32_t(combo));
                  ++combo;
                  if (::testing::Test::HasFatalFailure()) return;
                }
      });
  }
}

// Products past the small ones with k <= 128 and A within 2 MB take the small tiles' packed
// panels too (small_tiles_form): whole and partial panels (n = 256, 201: 4 panels), k at 64 and
// 128, a row tail (m = 301) through the wide kernels, on 1 and 2 threads (4 panels shared) and 3
// (the blocked path: panels do not divide), every transpose (A^T takes the blocked path),
// the scalars and layouts of GemmTester::cycle.
TEST_P(Gemm, PackedPanelsPastSmallProducts) {
  // On 1 thread against the reference, then on 2 or 3 (by turns) bit for bit against that: one
  // reference per product (C does not depend on the thread count).
  tbb::task_arena(1).execute([&] {
    int combo = 0;
    for (Transpose ta : kTrans)
      for (Transpose tb : kTrans)
        for (int64_t n : {256, 201})
          for (int64_t k : {64, 128}) {
            GemmTester()
                .m(301)
                .n(n)
                .k(k)
                .ta(ta)
                .tb(tb)
                .cycle(combo)
                .also_threads(2 + combo % 2)
                .test(uint32_t(combo));
            ++combo;
            if (::testing::Test::HasFatalFailure()) return;
          }
  });
}

// Mid-size products (A and B within 1 MB, k > 128) read A, and B when its rows are 64-byte
// aligned, in place; B^T and misaligned B are packed a panel at a time inside the tasks.
TEST_P(Gemm, MidSizeInPlaceAndPackedPerTask) {
  for (bool aligned : {true, false})
    for (Transpose ta : kTrans)
      for (Transpose tb : kTrans) {
        GemmTester().m(203).n(256).k(300).ta(ta).tb(tb).aligned_b(aligned).beta(0.3f).test();
        GemmTester().m(37).n(256 + 17).k(129).ta(ta).tb(tb).aligned_b(aligned).test();
        if (HasFatalFailure()) return;
      }
}

// Small products past kMinParallelMacs on several threads: one share of whole panels per
// thread when the panels divide among them (B in place, or B^T packed per task), for_grid's
// split otherwise (an odd panel count), every transpose.
TEST_P(Gemm, SmallProductsSplitAcrossThreads) {
  const int64_t NR = tessera::detail::active_table().gemm.nr;
  for (Transpose ta : kTrans)
    for (Transpose tb : kTrans)
      for (int threads : {2, 3}) {
        tbb::task_arena(threads).execute([&] {
          GemmTester().m(100).n(4 * NR).k(80).ta(ta).tb(tb).beta(0.3f).test();
          GemmTester().m(90).n(3 * NR - 5).k(150).ta(ta).tb(tb).alpha(-0.5f).test();
        });
        if (HasFatalFailure()) return;
      }
}

// Narrow products whose A (past 8 MB, read in place by one or two B panels) is streamed: each
// tile of a run fetches the next one's rows. One deep panel (n = 64) and two narrow ones (n =
// 40, a partial panel), k past one and two KC blocks, a partial row tile, 1 and 2 threads,
// beta = 0 over a poisoned C and beta = 0.3 with alpha = -0.5, padded leading dimensions; A^T
// (never fetched ahead) alongside.
TEST_P(Gemm, NarrowProductsStreamingA) {
  // Rows just past the active row's bound, and a partial row tile (the bound is a cache's size:
  // 8 MB on x86, 0.5-2 MB on the ARM rows).
  const double bound = tessera::detail::active_tuning().a_stream_bytes;
  auto rows_past = [&](int64_t k) { return int64_t(bound / (4.0 * double(k))) + 5; };
  // On 1 thread against the reference, then on 2 bit for bit against that.
  tbb::task_arena(1).execute([&] {
    GemmTester().m(rows_past(1100)).n(64).k(1100).also_threads(2).test();
    GemmTester()
        .m(rows_past(1100))
        .n(40)
        .k(1100)
        .alpha(-0.5f)
        .beta(0.3f)
        .pad(3)
        .also_threads(2)
        .test();
    GemmTester()
        .m(rows_past(2050))
        .n(64)
        .k(2050)
        .ta(Transpose::trans)
        .beta(0.3f)
        .also_threads(2)
        .test();
  });
}

// Few rows against a B past 1 MB: B streamed row by row (gemm_rows_stream.hpp), k blocks of
// the table's KB rows with the rows past the last whole block one at a time (k below, at and
// past a multiple of 8), the columns past the last whole vector through the wide kernels, A
// in place either way, every alpha/beta combination (beta = 0 over a NaN-poisoned C), padded
// leading dimensions.
TEST_P(Gemm, FewRowsStreamB) {
  sweep_lattice({1, 2, 3, 4}, {1003, 1024}, [](int64_t m, int64_t n) {
    return int64_t(262) + (m * 3 + n) % 4;  // 262 .. 265; 262 x 1003 floats > 1 MB
  });
  GemmTester().m(4).n(1024).k(1024).beta(0.3f).test();
  GemmTester().m(2).n(300).k(1000).ta(Transpose::trans).alpha(-0.5f).pad(3).test();
}

// Few rows against a narrow B split along k (chunks of 1024 rows) with both values of
// the tuning row's prefetch_streamed_b, so that the prefetching wide kernels run on every machine:
// one to three rows, whole vectors and a column tail (n = 200), a partial last chunk (k = 2049,
// 5000), a thread's share of B within L2 (the plain kernels even when asked) and past it, on 1 and
// 2 threads, the scalars and layouts of GemmTester::cycle. The prefetches change no sum: C is the
// same, bit for bit, with either kernels.
TEST_P(Gemm, FewRowsNarrowBAlongKEitherPrefetch) {
  const auto& g = tessera::detail::active_table().gemm;
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {
      {1, 128, 4096}, {2, 128, 8192}, {1, 200, 5000}, {3, 64, 2049}, {1, 16, 4096}};
  for (int threads : {1, 2})
    tbb::task_arena(threads).execute([&] {
      int combo = 0;
      for (const Shape& s : shapes) {
        std::vector<float> c[2];
        for (bool prefetch : {false, true}) {
          tessera::detail::Tuning tn = tessera::detail::active_tuning();
          tn.prefetch_streamed_b = prefetch;
          GemmTester().kernels(&g).tuning(&tn).m(s.m).n(s.n).k(s.k).cycle(combo).test(
              uint32_t(combo));
          if (::testing::Test::HasFatalFailure()) return;
          const auto a = tt::random_vec(size_t(s.m * s.k), 1);
          const auto b = tt::random_vec(size_t(s.k * s.n + 4), 2);
          c[prefetch].assign(size_t(s.m * s.n), 0.0f);
          tessera::detail::GemmProblem p;
          p.m = s.m, p.n = s.n, p.k = s.k, p.a = a.data(), p.lda = s.k, p.b = b.data() + 4;
          p.ldb = s.n, p.c = c[prefetch].data(), p.ldc = s.n, p.alpha = 1.0f, p.beta = 0.0f;
          ASSERT_EQ(tessera::detail::gemm_run(g, tn, p), tessera::Status::ok);
        }
        EXPECT_EQ(std::memcmp(c[0].data(), c[1].data(), c[0].size() * sizeof(float)), 0)
            << s.m << "x" << s.n << "x" << s.k << " on " << threads << " threads";
        ++combo;
      }
    });
}

// Bitwise identical C for 1, 2 and 8 threads on each path: small, mid-size with B in place
// (aligned) and per column slice (misaligned, B^T), blocked (past 4 MB), short k (column slices
// or shared blocks), and k across KC.
TEST_P(Gemm, BitwiseIdenticalForAnyThreadCount) {
  struct Case {
    int64_t m, n, k;
    Transpose tb;
    int64_t b_offset;  // floats past a 64-byte line
  };
  const int64_t KC = tessera::detail::active_table().gemm.kc;
  const Case cases[] = {{100, 100, 100, Transpose::no_trans, 4},
                        // small, split by whole panels per thread (B^T packed per task)
                        {64, 64, 64, Transpose::trans, 4},
                        // small, B in whole small-tile panels: rows split (AMD)
                        {128, 128, 128, Transpose::no_trans, 4},
                        {203, 256, 2 * KC + 3, Transpose::no_trans, 0},
                        {203, 256, 2 * KC + 3, Transpose::no_trans, 4},
                        {203, 300, 700, Transpose::trans, 4},
                        {300, 1200, KC + 1, Transpose::no_trans, 4},
                        // one deep panel (n = 64): rows split
                        {700, 64, 2 * KC + 3, Transpose::no_trans, 4},
                        // short k: column slices on 2 threads, shared blocks on 8
                        {150, 600, 64, Transpose::trans, 4},
                        // few rows against B^T: the dot path's per-thread K ranges
                        {1, 4096, 128, Transpose::trans, 4},
                        {5, 4001, 130, Transpose::trans, 0},
                        // few rows, narrow B: k split at fixed positions
                        {1, 128, 4096, Transpose::no_trans, 4},
                        {3, 200, 2500, Transpose::no_trans, 0},
                        // few rows, B past 1 MB: streamed rows, columns split per thread
                        {4, 1024, 1024, Transpose::no_trans, 4},
                        {3, 1003, 300, Transpose::no_trans, 0}};
  for (const Case& c : cases) {
    const int64_t ldb = c.tb == Transpose::no_trans ? c.n : c.k;
    const auto a = tt::random_vec(size_t(c.m * c.k), 1);
    auto b_store = tt::random_vec(size_t(c.k * c.n + 32), 2);
    const uintptr_t misalign = reinterpret_cast<uintptr_t>(b_store.data()) % 64 / 4;
    const float* b = b_store.data() + (16 - misalign) % 16 + c.b_offset;
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 8}) {
      std::vector<float> out(size_t(c.m * c.n), 0.0f);
      tbb::task_arena(threads).execute([&] {
        ASSERT_EQ(tessera::sgemm(Transpose::no_trans, c.tb, c.m, c.n, c.k, 1.0f, a.data(), c.k, b,
                                 ldb, 0.0f, out.data(), c.n),
                  tessera::Status::ok);
      });
      runs.push_back(out);
    }
    for (size_t r = 1; r < runs.size(); ++r)
      EXPECT_EQ(std::memcmp(runs[0].data(), runs[r].data(), runs[0].size() * sizeof(float)), 0)
          << c.m << "x" << c.n << "x" << c.k << " offset " << c.b_offset << ", run " << r;
  }
}

TEST_P(Gemm, StridedBatched) {
  for (Transpose ta : kTrans)
    for (Transpose tb : kTrans) {
      GemmTester().m(17).n(9).k(33).ta(ta).tb(tb).batch(5).beta(0.3f).test();
      GemmTester().m(3).n(33).k(5).ta(ta).tb(tb).batch(3).alpha(-0.5f).test();
    }
}

TEST_P(Gemm, PrepackedB) {
  for (Transpose ta : kTrans)
    for (Transpose tb : kTrans)
      for (int64_t n : {1, 15, 16, 17, 63}) {
        GemmTester().m(13).n(n).k(70).ta(ta).tb(tb).packed(true).beta(n % 2 ? 0.0f : 0.3f).test();
        if (HasFatalFailure()) return;
      }
  // One row (the row-panel kernel): partial groups and panels, several KC blocks, A^T.
  const auto& g = tessera::detail::active_table().gemm;
  const int64_t NR = g.nr, KC = g.kc;
  for (Transpose ta : kTrans)
    for (int64_t n : {int64_t(1), NR - 1, 3 * NR, 9 * NR + 5})
      for (int64_t k : {int64_t(1), int64_t(70), 2 * KC + 3}) {
        GemmTester().m(1).n(n).k(k).ta(ta).packed(true).beta(k % 2 ? 0.0f : 0.3f).test();
        if (HasFatalFailure()) return;
      }
}

TEST_P(Gemm, ZeroSizesTouchNothing) {
  float c[4] = {1, 2, 3, 4};
  const float a[4] = {1, 1, 1, 1};
  EXPECT_EQ(tessera::sgemm(Transpose::no_trans, Transpose::no_trans, 0, 2, 2, 1.0f, a, 2, a, 2,
                           0.0f, c, 2),
            tessera::Status::ok);
  EXPECT_EQ(tessera::sgemm(Transpose::no_trans, Transpose::no_trans, 2, 0, 2, 1.0f, a, 2, a, 2,
                           0.0f, c, 2),
            tessera::Status::ok);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[3], 4.0f);
}

// The tester must fail a kernel that drops one k term: each wide kernel (the few-row paths,
// k-chunked at the shapes of decode's P V) replaced by one that runs k - 1 steps.
tessera::arch::GemmStridedFn g_real_wide[tessera::arch::kMaxWideRows + 1]
                                        [tessera::arch::kWideWidths];

template <int R, int J>
void drop_last_term(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                    int64_t ldb, float* c, int64_t ldc, int64_t nr, float alpha, float beta) {
  g_real_wide[R][J](kc - 1, a, a_rs, a_cs, b, ldb, c, ldc, nr, alpha, beta);
}

template <int R, int... J>
void mutate_row(tessera::arch::GemmKernels& kt, std::integer_sequence<int, J...>) {
  ((g_real_wide[R][J] = kt.wide[R][J],
    kt.wide[R][J] = kt.wide[R][J] ? drop_last_term<R, J> : nullptr,
    kt.wide_prefetching[R][J] = kt.wide_prefetching[R][J] ? drop_last_term<R, J> : nullptr),
   ...);
}

tessera::arch::GemmKernels g_mutant;

TEST_P(Gemm, MutationDroppingOneTermFails) {
  g_mutant = tessera::detail::active_table().gemm;
  const auto widths = std::make_integer_sequence<int, tessera::arch::kWideWidths>();
  mutate_row<1>(g_mutant, widths);
  mutate_row<2>(g_mutant, widths);
  EXPECT_FATAL_FAILURE(GemmTester().kernels(&g_mutant).m(1).n(128).k(4096).test(), "want");
  EXPECT_FATAL_FAILURE(GemmTester().kernels(&g_mutant).m(2).n(128).k(8192).test(), "want");
}

TEST(GemmPacked, RejectsBufferOfAnotherShape) {
  std::vector<float> b(6 * 8, 1.0f), a(6 * 6, 1.0f), c(6 * 8, 0.0f);
  std::vector<float> buf(tessera::sgemm_pack_b_size(Transpose::no_trans, 6, 8) / 4 + 1);
  ASSERT_EQ(
      tessera::sgemm_pack_b(Transpose::no_trans, 6, 8, b.data(), 8, buf.data(), buf.size() * 4),
      tessera::Status::ok);
  EXPECT_EQ(tessera::sgemm_packed(Transpose::no_trans, 6, 8, 5, 1.0f, a.data(), 6, buf.data(), 0.0f,
                                  c.data(), 8),
            tessera::Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("packed"), std::string::npos);
  EXPECT_EQ(c[0], 0.0f);
  std::vector<float> junk(64, 0.0f);
  EXPECT_EQ(tessera::sgemm_packed(Transpose::no_trans, 6, 8, 6, 1.0f, a.data(), 6, junk.data(),
                                  0.0f, c.data(), 8),
            tessera::Status::invalid_argument);
}

// Hand-computed: [[1,2],[3,4]] [[5,6],[7,8]] = [[19,22],[43,50]]; with alpha 2, beta -1 on C=1.
TEST(GemmHand, TwoByTwo) {
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[] = {1, 1, 1, 1};
  ASSERT_EQ(tessera::sgemm(Transpose::no_trans, Transpose::no_trans, 2, 2, 2, 2.0f, a, 2, b, 2,
                           -1.0f, c, 2),
            tessera::Status::ok);
  EXPECT_EQ(c[0], 37.0f);
  EXPECT_EQ(c[1], 43.0f);
  EXPECT_EQ(c[2], 85.0f);
  EXPECT_EQ(c[3], 99.0f);
  // A^T B^T = (B A)^T: [[5,6],[7,8]] [[1,2],[3,4]] = [[23,34],[31,46]], transposed.
  ASSERT_EQ(
      tessera::sgemm(Transpose::trans, Transpose::trans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2),
      tessera::Status::ok);
  EXPECT_EQ(c[0], 23.0f);
  EXPECT_EQ(c[1], 31.0f);
  EXPECT_EQ(c[2], 34.0f);
  EXPECT_EQ(c[3], 46.0f);
}

}  // namespace
