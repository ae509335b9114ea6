// GEMM against block-type weights (tessera::gemm_ex with b_type q8_0 / q4_0) on every table:
// (a) exact path, against the reference on the same rounded activations and the dequantized
// weights, at the float32 tolerance of the sums the kernels do; (b) accuracy, against the
// reference on the float32 activations, within the bound tessera.h states; the same C for any
// thread count; the argument checks; and a mutated executor the exact check rejects.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "src/gemm/gemm_packed.hpp"
#include "src/gemm/gemm_quant.hpp"
#include "src/runtime/dispatch.hpp"
#include "src/runtime/threading.hpp"
#include "tessera/gemm.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.h"
#include "test_util.hpp"

namespace quant_gemm_test {

namespace {

namespace ref = tessera::reference;
using tessera::DType;
using tessera::Transpose;

constexpr float kGuard = 12345.0f;

// Weights n x k in blocks, rows ldb values apart: Gaussian values with a few columns 20x the
// rest (outliers, as trained weights have), quantized by the reference.
std::vector<uint8_t> make_weights(DType t, int64_t n, int64_t k, int64_t ldb, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const size_t row_bytes = ref::storage_bytes(tessera_dtype(t), ldb);
  std::vector<uint8_t> b(row_bytes * size_t(n) + 7, 0xA5);
  std::vector<float> row(static_cast<size_t>(ldb));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < ldb; ++p) row[size_t(p)] = g(gen) * (p % 61 == 5 ? 20.0f : 1.0f);
    ref::quantize(tessera_dtype(t), ldb, row.data(), &b[size_t(j) * row_bytes]);
  }
  (void)k;
  return b;
}

struct Case {
  int64_t m, n, k;
  DType type = DType::q8_0;
  Transpose ta = Transpose::no_trans;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // extra values per row (pad_b a multiple of 32)
  bool packed = false;                      // B through sgemm_pack_bq and sgemm_packed
};

struct Problem {
  std::vector<float> a, c0, out;
  std::vector<uint8_t> b;
  int64_t lda, ldb, ldc;
};

Problem prepare(const Case& cs, uint32_t seed) {
  Problem r;
  const int64_t a_rows = cs.ta == Transpose::no_trans ? cs.m : cs.k;
  const int64_t a_cols = cs.ta == Transpose::no_trans ? cs.k : cs.m;
  r.lda = std::max<int64_t>(1, a_cols) + cs.pad_a;
  r.ldb = cs.k + cs.pad_b;
  r.ldc = std::max<int64_t>(1, cs.n) + cs.pad_c;
  r.a = tt::random_vec(size_t(a_rows * r.lda + 3), seed);
  r.b = make_weights(cs.type, cs.n, cs.k, r.ldb, seed + 1);
  r.c0 = tt::random_vec(size_t(cs.m * r.ldc + 5), seed + 2);
  for (size_t i = 0; i < r.c0.size(); ++i) {
    const int64_t row = int64_t(i) / r.ldc, col = int64_t(i) % r.ldc;
    if (row >= cs.m || col >= cs.n)
      r.c0[i] = kGuard;
    else if (cs.beta == 0.0f)
      r.c0[i] = tt::kNaN;  // beta = 0 must not read C
  }
  r.out = r.c0;
  return r;
}

tessera::Status call(const Case& cs, Problem& r) {
  if (cs.packed) {
    const size_t bytes = tessera::sgemm_pack_bq_size(Transpose::trans, cs.k, cs.n, cs.type);
    if (bytes == 0) return tessera::Status::invalid_argument;
    std::vector<float> buf(bytes / 4 + 1, tt::kNaN);
    const tessera::Status st = tessera::sgemm_pack_bq(Transpose::trans, cs.k, cs.n, cs.type,
                                                      r.b.data(), r.ldb, buf.data(), bytes);
    if (st != tessera::Status::ok) return st;
    return tessera::sgemm_packed(cs.ta, cs.m, cs.n, cs.k, cs.alpha, r.a.data(), r.lda, buf.data(),
                                 cs.beta, r.out.data(), r.ldc);
  }
  return tessera::gemm_ex(cs.ta, Transpose::trans, cs.m, cs.n, cs.k, cs.alpha, DType::f32,
                          r.a.data(), r.lda, cs.type, r.b.data(), r.ldb, cs.beta, r.out.data(),
                          r.ldc);
}

// The magnitude sum_p |a_p b_p| over op(A)'s row i (rounded as `rounded` holds it) and B row j.
double magnitude(const Case& cs, const std::vector<float>& arow, const std::vector<float>& bf,
                 int64_t j) {
  double s = 0;
  for (int64_t p = 0; p < cs.k; ++p)
    s += std::fabs(double(arow[size_t(p)]) * bf[size_t(j * cs.k + p)]);
  return s;
}

// Elements outside tolerance (exact path: against the reference on the rounded rows) or beyond
// tessera.h's bound (accuracy: against the float32 rows); guards checked in both.
int64_t check(const Case& cs, const Problem& r, bool exact) {
  auto want = r.c0;
  ref::gemm_block_b(cs.ta, cs.m, cs.n, cs.k, cs.alpha, r.a.data(), r.lda, tessera_dtype(cs.type),
                    r.b.data(), r.ldb, cs.beta, want.data(), r.ldc, exact);
  std::vector<float> bf(size_t(cs.n * cs.k)), row(static_cast<size_t>(cs.k)),
      rq(static_cast<size_t>(cs.k));
  std::vector<uint8_t> blk(ref::storage_bytes(TESSERA_Q8_0, std::max<int64_t>(cs.k, 32)));
  const size_t row_bytes = ref::storage_bytes(tessera_dtype(cs.type), r.ldb);
  for (int64_t j = 0; j < cs.n; ++j)
    ref::dequantize(tessera_dtype(cs.type), cs.k, &r.b[size_t(j) * row_bytes],
                    &bf[size_t(j * cs.k)]);
  const int64_t blocks = cs.k / 32;
  int64_t bad = 0;
  for (size_t i = 0; i < r.out.size(); ++i) {
    const int64_t ri = int64_t(i) / r.ldc, col = int64_t(i) % r.ldc;
    if (ri >= cs.m || col >= cs.n) bad += r.out[i] != kGuard;
  }
  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t p = 0; p < cs.k; ++p)
      row[size_t(p)] =
          cs.ta == Transpose::no_trans ? r.a[size_t(i * r.lda + p)] : r.a[size_t(p * r.lda + i)];
    if (cs.k > 0) {
      ref::quantize(TESSERA_Q8_0, cs.k, row.data(), blk.data());
      ref::dequantize(TESSERA_Q8_0, cs.k, blk.data(), rq.data());
    }
    for (int64_t j = 0; j < cs.n; ++j) {
      const size_t at = size_t(i * r.ldc + j);
      const double c0 = cs.beta == 0.0f ? 0.0 : std::fabs(double(r.c0[at]));
      // float32 sums: a rounding per block's scale product, product and addition, the lanes'
      // tree, alpha and beta: (blocks + 16) u over the magnitudes.
      double bound =
          double(blocks + 16) * 0x1p-24 *
              ((cs.alpha != 0.0f ? std::fabs(cs.alpha) * magnitude(cs, rq, bf, j) : 0.0) +
               std::fabs(cs.beta) * c0) +
          1e-30;
      if (!exact)  // tessera.h: e_8 per block of the row, times the weights' sum there
        for (int64_t b = 0; b < blocks; ++b) {
          double amax = 0, bsum = 0;
          for (int64_t p = 32 * b; p < 32 * b + 32; ++p) {
            amax = std::max(amax, std::fabs(double(row[size_t(p)])));
            bsum += std::fabs(double(bf[size_t(j * cs.k + p)]));
          }
          bound += std::fabs(cs.alpha) * (0.00443 * amax + 4e-6) * bsum;
        }
      const double err = std::fabs(double(r.out[at]) - double(want[at]));
      if (!(err <= bound) && ++bad <= 3)
        ADD_FAILURE() << (exact ? "exact" : "accuracy") << " m " << cs.m << " n " << cs.n << " k "
                      << cs.k << " at " << i << "," << j << ": " << r.out[at] << " vs " << want[at]
                      << " (bound " << bound << ")";
    }
  }
  return bad;
}

class QuantGemm : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(QuantGemm);

// The edge lattice: rows across the dot kernels' groups, keys across their steps of 2 and 4,
// k across the VNNI kernel's 8-block passes and the GEMV kernels' 16-block chunks, both types, both
// A layouts, alpha and beta, padded rows.
TEST_P(QuantGemm, ExactPathEdgeLattice) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  int combo = 0;
  for (DType t : {DType::q8_0, DType::q4_0})
    for (int64_t m : {1, 2, 3, 4, 5, 9})
      for (int64_t n : {1, 3, 6, 17, 33}) {
        const int64_t ks[] = {32, 64, 96, 288, 320, 1056};  // 1056: GEMV chunks and a tail
        Case cs{m, n, ks[(m + n + combo) % 6], t};
        cs.ta = combo % 3 == 1 ? Transpose::trans : Transpose::no_trans;
        cs.alpha = combo % 3 == 2 ? -0.5f : 1.0f;
        cs.beta = combo % 2 ? 0.3f : 0.0f;
        cs.pad_a = combo % 5 == 0 ? 3 : 0;
        cs.pad_b = combo % 4 == 1 ? 32 : 0;
        cs.pad_c = combo % 5 == 2 ? 2 : 0;
        Problem r = prepare(cs, uint32_t(combo));
        ASSERT_EQ(call(cs, r), tessera::Status::ok) << tessera::last_error();
        EXPECT_EQ(check(cs, r, true), 0) << "m " << m << " n " << n << " combo " << combo;
        ++combo;
        if (HasFailure()) return;
      }
}

// The planner's splits: one row block over many column chunks (decode), row blocks by column
// chunks (prefill), a row block's last group short; and the float32-activation bound.
TEST_P(QuantGemm, AcrossTasksAndWithinTheStatedBound) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
#ifdef TESSERA_LIGHT_SWEEPS  // (qemu, sanitizers: the reference's double loops)
  const int64_t big = 0;
#else
  const int64_t big = 1;
#endif
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 3000, 1024}, {2, 700, 512}, {70, 130, 256}, {131 * big + 66, 97, 512}};
  int combo = 0;
  for (const auto& s : shapes)
    for (DType t : {DType::q8_0, DType::q4_0}) {
      Case cs{s[0], s[1], s[2], t};
      cs.beta = combo % 2 ? -1.0f : 0.0f;
      Problem r = prepare(cs, uint32_t(100 + combo++));
      ASSERT_EQ(call(cs, r), tessera::Status::ok) << tessera::last_error();
      EXPECT_EQ(check(cs, r, true), 0);
      EXPECT_EQ(check(cs, r, false), 0);
      if (HasFailure()) return;
    }
}

// Weights packed once (sgemm_pack_bq) for any number of rows: decode's one row through the
// tile's panels, a row group's edges, padded weight rows, A transposed.
TEST_P(QuantGemm, PackedWeightsForAnyRowCount) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const std::array<int64_t, 3> shapes[] = {
      {1, 300, 512}, {5, 70, 256}, {9, 17, 96}, {70, 40, 288}, {130, 33, 64}};
  int combo = 0;
  for (const auto& s : shapes)
    for (DType t : {DType::q8_0, DType::q4_0}) {
      Case cs{s[0], s[1], s[2], t};
      cs.packed = true;
      cs.ta = combo % 3 == 2 ? Transpose::trans : Transpose::no_trans;
      cs.alpha = combo % 4 == 1 ? 0.5f : 1.0f;
      cs.beta = combo % 2 ? 0.25f : 0.0f;
      cs.pad_b = combo % 3 == 1 ? 64 : 0;
      Problem r = prepare(cs, uint32_t(300 + combo++));
      ASSERT_EQ(call(cs, r), tessera::Status::ok) << tessera::last_error();
      EXPECT_EQ(check(cs, r, true), 0) << s[0] << "x" << s[1] << "x" << s[2];
      EXPECT_EQ(check(cs, r, false), 0);
      if (HasFailure()) return;
    }
}

TEST_P(QuantGemm, PackedWeightsRejectWhatTheyWereNotPackedFor) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  Case cs{2, 20, 64, DType::q4_0};
  Problem r = prepare(cs, 9);
  EXPECT_EQ(tessera::sgemm_pack_bq_size(Transpose::no_trans, 64, 20, DType::q4_0), 0u);
  EXPECT_EQ(tessera::sgemm_pack_bq_size(Transpose::trans, 64, 20, DType::f16), 0u);
  EXPECT_EQ(tessera::sgemm_pack_bq_size(Transpose::trans, 48, 20, DType::q8_0), 0u);
  // k n = 2^63 - 2^58 fits in int64_t, its bytes (34 or more per 32 values) do not.
  EXPECT_EQ(tessera::sgemm_pack_bq_size(Transpose::trans, int64_t(1) << 41,
                                        (int64_t(1) << 22) - (int64_t(1) << 17), DType::q8_0),
            0u);
  const size_t bytes = tessera::sgemm_pack_bq_size(Transpose::trans, 64, 20, DType::q4_0);
  ASSERT_GT(bytes, 0u);
  std::vector<float> buf(bytes / 4 + 1);
  EXPECT_EQ(tessera::sgemm_pack_bq(Transpose::trans, 64, 20, DType::q4_0, r.b.data(), 64,
                                   buf.data(), bytes - 1),
            tessera::Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("packed_bytes"), std::string::npos);
  ASSERT_EQ(tessera::sgemm_pack_bq(Transpose::trans, 64, 20, DType::q4_0, r.b.data(), 64,
                                   buf.data(), bytes),
            tessera::Status::ok);
  EXPECT_EQ(tessera::sgemm_packed(Transpose::no_trans, 2, 20, 32, 1.0f, r.a.data(), r.lda,
                                  buf.data(), 0.0f, r.out.data(), r.ldc),
            tessera::Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("k = 32"), std::string::npos);
  EXPECT_EQ(std::memcmp(r.out.data(), r.c0.data(), r.out.size() * 4), 0);
}

// tessera.h's size of packed block-type weights: a 64-byte header, then B's blocks with n
// rounded up to the table's tile width (at most 16 columns; 1 where the table has no tile): B's
// own bytes only where n is a multiple of it.
TEST_P(QuantGemm, PackedSizeIsTheStatedOne) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const int width = std::max(1, tessera::detail::active_table().quant.gemm_nr);
  ASSERT_LE(width, 16);
  for (const DType t : {DType::q8_0, DType::q4_0})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 64}, {16, 64}, {33, 96}}) {
      const int64_t columns = (n + width - 1) / width * width;
      const size_t want = 64 + size_t(columns * (k / 32)) * (t == DType::q8_0 ? 34 : 18);
      EXPECT_EQ(tessera::sgemm_pack_bq_size(Transpose::trans, k, n, t), want)
          << "n " << n << " k " << k << " width " << width;
    }
}

TEST_P(QuantGemm, SameResultOnOneAndTwoThreads) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  for (DType t : {DType::q8_0, DType::q4_0})
    for (int64_t m : {1, 70}) {
      Case cs{m, 600, 512, t};
      Problem one = prepare(cs, 7), two = prepare(cs, 7);
      ASSERT_EQ(tessera::set_num_threads(1), tessera::Status::ok);
      ASSERT_EQ(call(cs, one), tessera::Status::ok);
      ASSERT_EQ(tessera::set_num_threads(2), tessera::Status::ok);
      ASSERT_EQ(call(cs, two), tessera::Status::ok);
      ASSERT_EQ(tessera::set_num_threads(0), tessera::Status::ok);
      EXPECT_EQ(std::memcmp(one.out.data(), two.out.data(), one.out.size() * 4), 0) << m;
    }
}

// Products of one input against several packed weights (a layer's Q, K and V) in one call: each
// C bitwise the one its own sgemm_packed writes, on one and two threads, with beta 1 adding to C;
// weights of two block types, or 16-bit panels, run one by one.
TEST_P(QuantGemm, SharedInputProductsMatchTheirOwnCalls) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const int64_t k = 256, n[3] = {300, 64, 48};
  const std::array<DType, 3> mixes[] = {{DType::q8_0, DType::q8_0, DType::q8_0},
                                        {DType::q4_0, DType::q4_0, DType::q4_0},
                                        {DType::q4_0, DType::q8_0, DType::q4_0},
                                        {DType::f16, DType::f16, DType::f16}};
  for (const int threads : {1, 2})
    for (const auto& types : mixes)
      for (const int64_t m : {1, 5, 70}) {
        ASSERT_EQ(tessera::set_num_threads(threads), tessera::Status::ok);
        std::vector<std::vector<float>> packed(3);
        std::vector<float> own[3], shared[3];
        tessera::detail::PackedProduct p[3];
        const std::vector<float> a = tt::random_vec(size_t(m * k), 11);
        for (int i = 0; i < 3; ++i) {
          const bool block = types[i] != DType::f16;
          const std::vector<uint8_t> b = block ? make_weights(types[i], n[i], k, k, 20 + i)
                                               : std::vector<uint8_t>(size_t(k * n[i]) * 2, 0x3C);
          const size_t bytes =
              block ? tessera::sgemm_pack_bq_size(Transpose::trans, k, n[i], types[i])
                    : tessera::sgemm_pack_b16_size(Transpose::no_trans, k, n[i]);
          packed[size_t(i)].resize(bytes / 4 + 1);
          ASSERT_EQ(block
                        ? tessera::sgemm_pack_bq(Transpose::trans, k, n[i], types[i], b.data(), k,
                                                 packed[size_t(i)].data(), bytes)
                        : tessera::sgemm_pack_b16(Transpose::no_trans, k, n[i], types[i], b.data(),
                                                  n[i], packed[size_t(i)].data(), bytes),
                    tessera::Status::ok);
          const float beta = i == 1 ? 1.0f : 0.0f;
          own[i] = shared[i] = tt::random_vec(size_t(m * n[i]), 30 + i);
          ASSERT_EQ(tessera::sgemm_packed(Transpose::no_trans, m, n[i], k, 1.0f, a.data(), k,
                                          packed[size_t(i)].data(), beta, own[i].data(), n[i]),
                    tessera::Status::ok);
          p[i] = {n[i], packed[size_t(i)].data(), beta, shared[i].data(), n[i]};
        }
        ASSERT_EQ(tessera::detail::in_arena([&] {
                    return tessera::detail::sgemm_packed_shared_a(m, k, a.data(), k, p, 3);
                  }),
                  tessera::Status::ok);
        for (int i = 0; i < 3; ++i)
          EXPECT_EQ(std::memcmp(own[i].data(), shared[i].data(), own[i].size() * 4), 0)
              << "product " << i << " m " << m << " threads " << threads;
        if (HasFailure()) break;
      }
  ASSERT_EQ(tessera::set_num_threads(0), tessera::Status::ok);
}

// One thread runs a call's tasks in one loop: through TBB each task's atomics wait for the loads
// in flight and break the weights' stream. Two threads still split it.
TEST_P(QuantGemm, OneThreadRunsTheTasksInOneLoop) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  const uint8_t b[1] = {};  // the planner reads the shape, not B
  for (const int threads : {1, 2}) {
    ASSERT_EQ(tessera::set_num_threads(threads), tessera::Status::ok);
    for (const int64_t m : {1, 64}) {
      const tessera::detail::QuantGemm q{false, m,           8192, 8192, 1.0f,    0.0f, nullptr,
                                         8192,  DType::q4_0, b,    8192, nullptr, 8192};
      tessera::detail::QuantGemmPlan plan{};
      ASSERT_EQ(tessera::detail::in_arena([&] {
                  plan = tessera::detail::plan_quant_gemm(tessera::detail::active_table(),
                                                          tessera::detail::active_tuning(), q);
                  return tessera::Status::ok;
                }),
                tessera::Status::ok);
      EXPECT_EQ(plan.parallel, threads > 1) << "threads " << threads << " m " << m;
    }
  }
  ASSERT_EQ(tessera::set_num_threads(0), tessera::Status::ok);
}

// alpha = 0 and k = 0 give beta C, reading neither A nor B (beta = 0: zeros over NaN).
TEST_P(QuantGemm, AlphaZeroAndEmptyK) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  for (const float beta : {0.0f, 2.0f}) {
    Case cs{3, 5, 64, DType::q4_0};
    cs.alpha = 0.0f, cs.beta = beta;
    Problem r = prepare(cs, 3);
    std::fill(r.b.begin(), r.b.end(), 0xFF);  // NaN scales: any read would show
    ASSERT_EQ(call(cs, r), tessera::Status::ok);
    EXPECT_EQ(check(cs, r, true), 0);
    Case ck{3, 5, 0, DType::q8_0};
    ck.beta = beta;
    Problem rk = prepare(ck, 4);
    ASSERT_EQ(
        tessera::gemm_ex(Transpose::no_trans, Transpose::trans, 3, 5, 0, 1.0f, DType::f32,
                         rk.a.data(), 1, DType::q8_0, rk.b.data(), 32, beta, rk.out.data(), rk.ldc),
        tessera::Status::ok);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        const size_t at = size_t(i * rk.ldc + j);
        EXPECT_EQ(rk.out[at], beta == 0.0f ? 0.0f : beta * rk.c0[at]);
      }
  }
}

// Each bad argument named, C untouched.
TEST_P(QuantGemm, RejectsBadArgumentsWritingNothing) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  Case cs{2, 3, 64, DType::q8_0};
  Problem r = prepare(cs, 5);
  const auto rejects = [&](tessera::Status st, const char* name) {
    EXPECT_EQ(st, tessera::Status::invalid_argument) << name;
    EXPECT_NE(std::string(tessera::last_error()).find(name), std::string::npos)
        << tessera::last_error();
    EXPECT_EQ(std::memcmp(r.out.data(), r.c0.data(), r.out.size() * 4), 0) << name;
  };
  const void* a = r.a.data();
  const void* b = r.b.data();
  float* c = r.out.data();
  rejects(tessera::gemm_ex(Transpose::no_trans, Transpose::no_trans, 2, 3, 64, 1, DType::f32, a, 64,
                           DType::q8_0, b, 64, 0, c, r.ldc),
          "tb");
  rejects(tessera::gemm_ex(Transpose::no_trans, Transpose::trans, 2, 3, 48, 1, DType::f32, a, 64,
                           DType::q4_0, b, 64, 0, c, r.ldc),
          "k = 48");
  rejects(tessera::gemm_ex(Transpose::no_trans, Transpose::trans, 2, 3, 64, 1, DType::f32, a, 64,
                           DType::q8_0, b, 80, 0, c, r.ldc),
          "ldb = 80");
  rejects(tessera::gemm_ex(Transpose::no_trans, Transpose::trans, 2, 3, 64, 1, DType::f16, a, 64,
                           DType::q8_0, b, 64, 0, c, r.ldc),
          "a_type");
  rejects(tessera::gemm_ex(Transpose::no_trans, Transpose::trans, 2, 3, 64, 1, DType::f32, a, 64,
                           DType(9), b, 64, 0, c, r.ldc),
          "b_type");
}

// A dot or GEMV kernel that leaves out its call's last weight row (an executor that lost the
// last column of each chunk does the same): the exact check must see it.
tessera::arch::QuantDotFn g_real[2] = {};
template <int Slot>
void drop_last_key(const tessera::arch::QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n,
                   float* s, int64_t lds, float alpha) {
  g_real[Slot](q, k, ldk, n > 1 ? n - 1 : n, s, lds, alpha);
}

// The mutant's call: its failures counted (a test part result each), not reported.
void expect_mutant_rejected(int64_t k) {
  tessera::arch::KernelTable mutant = tessera::detail::active_table();
  g_real[0] = mutant.quant.dot[0][1], g_real[1] = mutant.quant.gemv[0][1];
  mutant.quant.dot[0][1] = &drop_last_key<0>;
  if (g_real[1] != nullptr) mutant.quant.gemv[0][1] = &drop_last_key<1>;
  const tessera::arch::KernelTable* previous =
      tessera::detail::exchange_active_table_for_testing(&mutant);
  Case cs{1, 100, k, DType::q8_0};
  Problem r = prepare(cs, 11);
  const tessera::Status st = call(cs, r);
  int64_t bad = 0;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter quiet(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    bad = check(cs, r, true);
  }
  tessera::detail::exchange_active_table_for_testing(previous);
  ASSERT_EQ(st, tessera::Status::ok);
  EXPECT_GT(bad, 0) << "the mutant passed (k " << k << ")";
}

TEST_P(QuantGemm, MutantIsRejected) {
  TESSERA_SKIP_WITHOUT_BLOCK_TYPES();
  expect_mutant_rejected(128);   // the dot kernels
  expect_mutant_rejected(1024);  // the GEMV kernels, where the table has them
}

}  // namespace

}  // namespace quant_gemm_test
