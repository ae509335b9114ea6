// GEMM with 16-bit operands (tessera::gemm_ex) against the reference on the same rounded values,
// on every kernel table: the edge lattice and the widening blocks' edges (256 rows, columns and
// k), all four transposes, every type pair, and the argument checks.
#include <tbb/task_arena.h>

#include <array>
#include <cstring>
#include <vector>

#include "gemm_tester.hpp"
#include "src/runtime/check.hpp"
#include "src/runtime/dispatch.hpp"
#include "tessera/convert.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.h"

namespace gemm_ex_test {

using tessera::DType;
using tessera::Transpose;

namespace {

constexpr Transpose kTrans[] = {Transpose::no_trans, Transpose::trans};
constexpr std::array<std::array<DType, 2>, 5> kTypes = {{{DType::f32, DType::f16},
                                                         {DType::f32, DType::bf16},
                                                         {DType::bf16, DType::bf16},
                                                         {DType::f16, DType::f16},
                                                         {DType::bf16, DType::f32}}};

class GemmEx : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(GemmEx);

TEST_P(GemmEx, EdgeLatticeEveryTypePair) {
  const int64_t sizes[] = {1, 3, 17, 63, 65};
  int combo = 0;
  for (const auto& types : kTypes)
    for (Transpose ta : kTrans)
      for (Transpose tb : kTrans)
        for (int64_t m : sizes)
          for (int64_t n : sizes) {
            GemmTester()
                .m(m)
                .n(n)
                .k(sizes[(m + 2 * n + combo) % 5])
                .ta(ta)
                .tb(tb)
                .types(types[0], types[1])
                .cycle(combo)
                .test(uint32_t(combo));
            ++combo;
            if (HasFatalFailure()) return;
          }
}

// Shapes across the 256-wide widening blocks in each dimension, and the decode and weight shapes.
TEST_P(GemmEx, AcrossWideningBlocks) {
  const std::array<int64_t, 3> shapes[] = {
      {257, 300, 513}, {1, 4096, 128}, {4, 1000, 700}, {300, 64, 600}, {513, 257, 3}};
  int combo = 0;
  for (const auto& s : shapes)
    for (Transpose tb : kTrans) {
      const auto& types = kTypes[size_t(combo) % kTypes.size()];
      GemmTester()
          .m(s[0])
          .n(s[1])
          .k(s[2])
          .tb(tb)
          .types(types[0], types[1])
          .cycle(combo)
          .test(uint32_t(combo));
      ++combo;
      if (HasFatalFailure()) return;
    }
}

// Few float32 rows against 16-bit weights either way round (x W and x W^T: the kernels that
// widen B in registers), over several column chunks and k blocks.
TEST_P(GemmEx, FewRowsAgainstSixteenBitWeights) {
  int combo = 0;
  for (Transpose tb : kTrans)
    for (DType bt : {DType::f16, DType::bf16})
      for (int64_t m : {1, 4, 5}) {
        GemmTester()
            .m(m)
            .n(700)
            .k(100)
            .tb(tb)
            .types(DType::f32, bt)
            .cycle(combo)
            .test(uint32_t(combo));
        ++combo;
        if (HasFatalFailure()) return;
      }
}

// Few rows against 16-bit weights stored k x n, streamed over each thread's share of the whole
// vectors: fewer vectors than threads, none (n < W: the column tail alone), a tail after them;
// k below and past the kernels' block of rows. C is the same, bit for bit, on 1 and 2 threads.
TEST_P(GemmEx, FewRowsStreamedSameOnAnyThreadCount) {
  const auto& kt = tessera::detail::active_table();
  const int64_t w = kt.simd_floats;
  int combo = 0;
  for (DType bt : {DType::f16, DType::bf16})
    for (int64_t m : {1, 3})
      for (int64_t n : {w / 2 + 1, w, 3 * w + 5, 64 * w + 3}) {
        const int64_t k = int64_t(1) + (combo * 37) % 300;
        GemmTester().m(m).n(n).k(k).types(DType::f32, bt).cycle(combo).test(uint32_t(combo));
        if (HasFatalFailure()) return;
        const auto a = tt::random_vec(size_t(m * k), 3);
        const auto f = tt::random_vec(size_t(k * n), 4);
        std::vector<uint16_t> b(f.size());
        ASSERT_EQ(tessera::convert(DType::f32, bt, int64_t(f.size()), f.data(), b.data()),
                  tessera::Status::ok);
        std::vector<float> c[2];
        for (int threads : {1, 2}) {
          auto& out = c[threads - 1];
          out.assign(size_t(m * n), 0.0f);
          tbb::task_arena(threads).execute([&] {
            ASSERT_EQ(
                tessera::gemm_ex(Transpose::no_trans, Transpose::no_trans, m, n, k, 1.0f,
                                 DType::f32, a.data(), k, bt, b.data(), n, 0.0f, out.data(), n),
                tessera::Status::ok);
          });
        }
        EXPECT_EQ(std::memcmp(c[0].data(), c[1].data(), c[0].size() * sizeof(float)), 0)
            << m << "x" << n << "x" << k;
        ++combo;
      }
}

// bf16 x bf16 across the dot-product executor's blocks where the table has one (k blocks of
// 256 with an odd k, row blocks of 336, 32-column panels with a partial last one; few rows
// against B^T on the dot kernels, over column chunks and a masked k tail; the widened path
// elsewhere), all four transposes, and C the same for 1 and 2 threads.
TEST_P(GemmEx, Bf16TimesBf16AcrossDotBlocks) {
  const std::array<int64_t, 3> shapes[] = {
      {700, 97, 515}, {15, 33, 257}, {337, 64, 256}, {3, 277, 300}, {8, 40, 33}};
  int combo = 0;
  for (const auto& s : shapes)
    for (Transpose ta : kTrans)
      for (Transpose tb : kTrans) {
        const int64_t m = s[0], n = s[1], k = s[2];
        GemmTester()
            .m(m)
            .n(n)
            .k(k)
            .ta(ta)
            .tb(tb)
            .types(DType::bf16, DType::bf16)
            .cycle(combo)
            .test(uint32_t(combo));
        if (HasFatalFailure()) return;
        std::vector<uint16_t> a(size_t(m * k)), b(size_t(k * n));
        const auto fa = tt::random_vec(a.size(), 5), fb = tt::random_vec(b.size(), 6);
        tessera::convert(DType::f32, DType::bf16, int64_t(a.size()), fa.data(), a.data());
        tessera::convert(DType::f32, DType::bf16, int64_t(b.size()), fb.data(), b.data());
        const int64_t lda = ta == Transpose::trans ? m : k, ldb = tb == Transpose::trans ? k : n;
        std::vector<float> c[2];
        for (int threads : {1, 2}) {
          c[threads - 1].assign(size_t(m * n), 0.5f);
          tbb::task_arena(threads).execute([&] {
            ASSERT_EQ(tessera::gemm_ex(ta, tb, m, n, k, 0.75f, DType::bf16, a.data(), lda,
                                       DType::bf16, b.data(), ldb, 1.0f, c[threads - 1].data(), n),
                      tessera::Status::ok);
          });
        }
        EXPECT_EQ(std::memcmp(c[0].data(), c[1].data(), c[0].size() * sizeof(float)), 0)
            << m << "x" << n << "x" << k;
        ++combo;
      }
}

// Packing from a 16-bit B: the packed bytes are those tessera_sgemm_pack_b writes for the
// widened B (either layout; k across the kc blocks, n across the widening chunks and a partial
// panel), and sgemm_packed on them gives the float32 product's C bit for bit.
TEST_P(GemmEx, PackFromSixteenBitsEqualsPackOfWidened) {
  const std::array<int64_t, 2> shapes[] = {{1, 1}, {37, 70}, {700, 1030}};
  int combo = 0;
  for (const auto& s : shapes)
    for (DType bt : {DType::f16, DType::bf16})
      for (Transpose tb : kTrans) {
        const int64_t k = s[0], n = s[1], rows = tb == Transpose::trans ? n : k;
        const int64_t cols = tb == Transpose::trans ? k : n, ldb = cols + 3;
        const auto f = tt::random_vec(size_t(rows * ldb), uint32_t(60 + combo++));
        std::vector<uint16_t> b(f.size());
        std::vector<float> wide(f.size());
        ASSERT_EQ(tessera::convert(DType::f32, bt, int64_t(f.size()), f.data(), b.data()),
                  tessera::Status::ok);
        ASSERT_EQ(tessera::convert(bt, DType::f32, int64_t(b.size()), b.data(), wide.data()),
                  tessera::Status::ok);
        const size_t bytes = tessera::sgemm_pack_b_size(tb, k, n);
        ASSERT_GT(bytes, 0u);
        std::vector<float> p16(bytes / 4 + 1, 5.0f), p32(bytes / 4 + 1, 5.0f);
        ASSERT_EQ(tessera::sgemm_pack_b_ex(tb, k, n, bt, b.data(), ldb, p16.data(), bytes),
                  tessera::Status::ok)
            << tessera::last_error();
        ASSERT_EQ(tessera::sgemm_pack_b(tb, k, n, wide.data(), ldb, p32.data(), bytes),
                  tessera::Status::ok);
        EXPECT_EQ(std::memcmp(p16.data(), p32.data(), bytes), 0) << k << "x" << n << " " << combo;
        EXPECT_EQ(p16.back(), 5.0f) << "wrote past packed_bytes";
        const int64_t m = 3;
        const auto a = tt::random_vec(size_t(m * k), 9);
        std::vector<float> c1(size_t(m * n)), c2(c1.size());
        ASSERT_EQ(tessera::sgemm_packed(Transpose::no_trans, m, n, k, 1.0f, a.data(), k, p16.data(),
                                        0.0f, c1.data(), n),
                  tessera::Status::ok);
        ASSERT_EQ(tessera::sgemm(Transpose::no_trans, tb, m, n, k, 1.0f, a.data(), k, wide.data(),
                                 ldb, 0.0f, c2.data(), n),
                  tessera::Status::ok);
        EXPECT_LE(tt::rel_err(c1, c2), 1e-5);
      }
  // A bad type is rejected naming b_type, with nothing written.
  std::vector<float> packed(64, 5.0f), b(16);
  EXPECT_EQ(tessera::sgemm_pack_b_ex(Transpose::no_trans, 4, 4, DType(9), b.data(), 4,
                                     packed.data(), packed.size() * 4),
            tessera::Status::invalid_argument);
  EXPECT_NE(std::string(tessera::last_error()).find("b_type"), std::string::npos);
  for (float x : packed) EXPECT_EQ(x, 5.0f);
}

// Panels kept in 16 bits (sgemm_pack_b16): half the bytes of the float32 panels, and
// sgemm_packed gives, bit for bit, the C it gives for the same B packed widened (pack_b_ex): one
// to four rows (the row-panel kernels, widening as they load) and more (the blocked path, widening
// a block at a time), k across KC blocks, a partial last panel, beta and alpha, 1 and 2 threads.
TEST_P(GemmEx, PackedInSixteenBitsEqualsPackedWidened) {
  const std::array<int64_t, 2> shapes[] = {{1, 1}, {37, 70}, {700, 1030}, {1300, 130}};
  int combo = 0;
  for (const auto& s : shapes)
    for (DType bt : {DType::f16, DType::bf16})
      for (Transpose tb : kTrans) {
        const int64_t k = s[0], n = s[1], rows = tb == Transpose::trans ? n : k;
        const int64_t cols = tb == Transpose::trans ? k : n, ldb = cols + 3;
        const auto f = tt::random_vec(size_t(rows * ldb), uint32_t(80 + combo++));
        std::vector<uint16_t> b(f.size());
        ASSERT_EQ(tessera::convert(DType::f32, bt, int64_t(f.size()), f.data(), b.data()),
                  tessera::Status::ok);
        const size_t bytes32 = tessera::sgemm_pack_b_size(tb, k, n);
        const size_t bytes16 = tessera::sgemm_pack_b16_size(tb, k, n);
        EXPECT_EQ(bytes16 - 64, (bytes32 - 64) / 2);
        std::vector<float> p32(bytes32 / 4), p16(bytes16 / 4 + 1, 5.0f);
        ASSERT_EQ(tessera::sgemm_pack_b_ex(tb, k, n, bt, b.data(), ldb, p32.data(), bytes32),
                  tessera::Status::ok);
        ASSERT_EQ(tessera::sgemm_pack_b16(tb, k, n, bt, b.data(), ldb, p16.data(), bytes16),
                  tessera::Status::ok)
            << tessera::last_error();
        EXPECT_EQ(p16.back(), 5.0f) << "wrote past packed_bytes";
        for (int64_t m : {1, 2, 3, 4, 7})
          for (int threads : {1, 2}) {
            const float alpha = combo % 2 ? 1.0f : -0.5f, beta = m == 2 ? 0.5f : 0.0f;
            const auto a = tt::random_vec(size_t(m * k), uint32_t(9 + m));
            std::vector<float> c32(size_t(m * n), 1.0f), c16(c32);
            tbb::task_arena(threads).execute([&] {
              ASSERT_EQ(tessera::sgemm_packed(Transpose::no_trans, m, n, k, alpha, a.data(), k,
                                              p32.data(), beta, c32.data(), n),
                        tessera::Status::ok);
              ASSERT_EQ(tessera::sgemm_packed(Transpose::no_trans, m, n, k, alpha, a.data(), k,
                                              p16.data(), beta, c16.data(), n),
                        tessera::Status::ok)
                  << tessera::last_error();
            });
            EXPECT_EQ(std::memcmp(c32.data(), c16.data(), c32.size() * sizeof(float)), 0)
                << m << "x" << n << "x" << k << " " << tessera::detail::dtype_name(bt)
                << " threads " << threads;
          }
      }
}

// sgemm_pack_b16 takes only 16-bit B and a buffer of its own size, writing nothing otherwise;
// sgemm_packed refuses a header whose type field is not a type.
// NaN and inf in a 16-bit A or B reach exactly the elements of C whose sums they enter, on the
// few-row and the blocked paths and every type pair: NaN in A(i, p) makes row i NaN, inf in
// B(p, j) makes column j infinite, and NaN where the A(i, p) it meets is 0; the rest is finite.
TEST_P(GemmEx, NanAndInfReachTheirRowsAndColumns) {
  namespace ref = tessera::reference;
  for (const auto& types : kTypes)
    for (int64_t m : {1, 3, 300}) {
      const int64_t n = 37, k = 70, bad_row = m > 2 ? 2 : 0, zero_row = m - 1, inf_col = 5;
      auto af = tt::random_vec(size_t(m * k), 9), bf = tt::random_vec(size_t(k * n), 10);
      af[size_t(bad_row * k + 10)] = tt::kNaN;
      bf[size_t(33 * n + inf_col)] = tt::kInf;
      if (zero_row != bad_row) af[size_t(zero_row * k + 33)] = 0.0f;  // inf x 0
      const auto store = [](DType t, const std::vector<float>& f) {
        std::vector<uint16_t> h(f.size());
        for (size_t i = 0; i < f.size(); ++i)
          h[i] = t == DType::f16 ? ref::f32_to_f16(f[i]) : ref::f32_to_bf16(f[i]);
        return h;
      };
      const auto ah = store(types[0], af), bh = store(types[1], bf);
      const void* a = types[0] == DType::f32 ? static_cast<const void*>(af.data()) : ah.data();
      const void* b = types[1] == DType::f32 ? static_cast<const void*>(bf.data()) : bh.data();
      std::vector<float> c(size_t(m * n), 7.0f);
      ASSERT_EQ(tessera::gemm_ex(Transpose::no_trans, Transpose::no_trans, m, n, k, 1.0f, types[0],
                                 a, k, types[1], b, n, 0.0f, c.data(), n),
                tessera::Status::ok)
          << tessera::last_error();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float got = c[size_t(i * n + j)];
          if (i == bad_row || (i == zero_row && j == inf_col && zero_row != bad_row)) {
            EXPECT_TRUE(std::isnan(got)) << "m " << m << " (" << i << ", " << j << ")";
          } else if (j == inf_col) {
            EXPECT_TRUE(std::isinf(got)) << "m " << m << " (" << i << ", " << j << ")";
          } else {
            EXPECT_TRUE(std::isfinite(got)) << "m " << m << " (" << i << ", " << j << ")";
          }
        }
      if (HasFailure()) return;
    }
}

TEST(GemmExApi, PackB16RejectsBadArgumentsAndWritesNothing) {
  // The buffer the size query asks for (the table's panel width sets it: 256 bytes with
  // AVX2's 16 columns, more with AVX-512's 32), so that a correct call stays inside it.
  const size_t need = tessera_sgemm_pack_b16_size(TESSERA_NO_TRANS, 4, 4);
  std::vector<float> packed((need + 3) / 4, 5.0f), b(16);
  const auto untouched = [&] {
    for (float x : packed)
      if (x != 5.0f) return false;
    return true;
  };
  EXPECT_EQ(tessera_sgemm_pack_b16(TESSERA_NO_TRANS, 4, 4, TESSERA_F32, b.data(), 4, packed.data(),
                                   packed.size() * 4),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("b_type"), std::string::npos);
  EXPECT_EQ(tessera_sgemm_pack_b16(TESSERA_NO_TRANS, 4, 4, tessera_dtype(3), b.data(), 4,
                                   packed.data(), packed.size() * 4),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("b_type"), std::string::npos);
  EXPECT_EQ(tessera_sgemm_pack_b16(TESSERA_NO_TRANS, 4, 4, TESSERA_F16, b.data(), 4, packed.data(),
                                   need - 1),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("packed_bytes"), std::string::npos);
  EXPECT_TRUE(untouched());
  EXPECT_EQ(tessera_sgemm_pack_b16_size(tessera_transpose(7), 4, 4), 0u);
  ASSERT_EQ(tessera_sgemm_pack_b16(TESSERA_NO_TRANS, 4, 4, TESSERA_BF16, b.data(), 4, packed.data(),
                                   need),
            TESSERA_OK);
  std::vector<float> a(4, 1.0f), c(4, 7.0f);
  int32_t bad = 9;
  std::memcpy(reinterpret_cast<char*>(packed.data()) + 48, &bad, 4);  // PackedBHeader::type
  EXPECT_EQ(tessera_sgemm_packed(TESSERA_NO_TRANS, 1, 4, 4, 1.0f, a.data(), 4, packed.data(), 0.0f,
                                 c.data(), 4),
            TESSERA_INVALID_ARGUMENT);
  for (float x : c) EXPECT_EQ(x, 7.0f);
}

TEST(GemmExApi, RejectsBadTypesAndWritesNothing) {
  std::vector<uint16_t> a(64), b(64);
  std::vector<float> c(64, 7.0f);
  EXPECT_EQ(tessera_gemm_ex(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 8, 8, 8, 1.0f, tessera_dtype(5),
                            a.data(), 8, TESSERA_F16, b.data(), 8, 0.0f, c.data(), 8),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("a_type"), std::string::npos);
  EXPECT_EQ(tessera_gemm_ex(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 8, 8, 8, 1.0f, TESSERA_F16,
                            a.data(), 8, tessera_dtype(-1), b.data(), 8, 0.0f, c.data(), 8),
            TESSERA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("b_type"), std::string::npos);
  // C over the 16-bit B (its bytes, not its float count) is rejected.
  EXPECT_EQ(
      tessera_gemm_ex(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 2, 8, 8, 1.0f, TESSERA_F16, a.data(), 8,
                      TESSERA_F16, b.data(), 8, 0.0f, reinterpret_cast<float*>(b.data() + 62), 8),
      TESSERA_INVALID_ARGUMENT);
  for (float x : c) EXPECT_EQ(x, 7.0f);
}

}  // namespace

}  // namespace gemm_ex_test
