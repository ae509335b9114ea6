// Softmax, log-softmax and logsumexp: hand values, the seed example, properties and the special
// rows, on every kernel table.
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "src/runtime/tuning.hpp"
#include "tessera/reference.hpp"
#include "tessera/softmax.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace softmax_test {

namespace {

using tessera::Status;

class Softmax : public tt::IsaTest {};
TESSERA_INSTANTIATE_PER_ISA(Softmax);

// Seed notebook 003: softmax([3.0, 1.0, 0.2]) printed as [0.8360188 0.11314284 0.05083836].
TEST_P(Softmax, SeedExample) {
  const float x[] = {3.0f, 1.0f, 0.2f};
  float y[3];
  ASSERT_EQ(tessera::softmax(1, 3, x, 3, y, 3), Status::ok);
  EXPECT_NEAR(y[0], 0.8360188f, 1e-6f);
  EXPECT_NEAR(y[1], 0.11314284f, 1e-6f);
  EXPECT_NEAR(y[2], 0.05083836f, 1e-6f);
  // The seed's 2-D example normalises columns; its transpose is our row-wise softmax:
  // column [1, 2, 3] -> [0.09003057, 0.24472847, 0.66524096].
  const float col[] = {1.0f, 2.0f, 3.0f};
  ASSERT_EQ(tessera::softmax(1, 3, col, 3, y, 3), Status::ok);
  EXPECT_NEAR(y[0], 0.09003057f, 1e-6f);
  EXPECT_NEAR(y[1], 0.24472847f, 1e-6f);
  EXPECT_NEAR(y[2], 0.66524096f, 1e-6f);
}

// Hand-computed: logsumexp([0, ln 3]) = ln 4; log_softmax = [-ln 4, ln 3 - ln 4]; scale 2 on
// [0, ln 3 / 2] gives the same.
TEST_P(Softmax, HandLogDomain) {
  const float x[] = {0.0f, std::log(3.0f)};
  float out, y[2];
  ASSERT_EQ(tessera::logsumexp(1, 2, x, 2, 1.0f, &out), Status::ok);
  EXPECT_NEAR(out, std::log(4.0f), 1e-6f);
  ASSERT_EQ(tessera::log_softmax(1, 2, x, 2, y, 2), Status::ok);
  EXPECT_NEAR(y[0], -std::log(4.0f), 1e-6f);
  EXPECT_NEAR(y[1], std::log(0.75f), 1e-6f);
  const float half[] = {0.0f, std::log(3.0f) / 2};
  ASSERT_EQ(tessera::logsumexp(1, 2, half, 2, 2.0f, &out), Status::ok);
  EXPECT_NEAR(out, std::log(4.0f), 1e-6f);
}

// Negative and zero scales (softmin, uniform rows) on every path: register rows, exp-store
// groups, long cached rows, chunked rows (one row across threads and several), in place, with
// the special rows (+inf becomes -inf under a negative scale), against the reference.
TEST_P(Softmax, NegativeAndZeroScales) {
  for (int64_t cols : {5, 100, 4099, 40000}) {
    for (int64_t rows : {1, 3}) {
      const int64_t ld = cols + 1;
      auto x = tt::random_vec(size_t(rows * ld), uint32_t(cols + rows), -8.0f, 8.0f);
      x[1] = tt::kInf;                      // row 0: -inf under a negative scale
      if (rows > 1) x[ld + 2] = -tt::kInf;  // row 1: takes all the mass under a negative scale
      for (float scale : {-1.0f, -0.3f, 0.0f}) {
        for (int op = 0; op < 3; ++op) {
          std::vector<float> y(x.size(), 7.0f), ref(x.size(), 7.0f), yi = x;
          Status s;
          if (op == 0) {
            s = tessera::softmax(rows, cols, x.data(), ld, y.data(), ld, scale);
            tessera::reference::softmax(rows, cols, x.data(), ld, ref.data(), ld, scale);
            ASSERT_EQ(tessera::softmax(rows, cols, yi.data(), ld, yi.data(), ld, scale), s);
          } else if (op == 1) {
            s = tessera::log_softmax(rows, cols, x.data(), ld, y.data(), ld, scale);
            tessera::reference::log_softmax(rows, cols, x.data(), ld, ref.data(), ld, scale);
            ASSERT_EQ(tessera::log_softmax(rows, cols, yi.data(), ld, yi.data(), ld, scale), s);
          } else {
            s = tessera::logsumexp(rows, cols, x.data(), ld, scale, y.data());
            tessera::reference::logsumexp(rows, cols, x.data(), ld, scale, ref.data());
            yi = y;  // no in-place form
          }
          ASSERT_EQ(s, Status::ok) << tessera::last_error();
          const size_t n = op == 2 ? size_t(rows) : y.size();
          // Elements of the padding column stay 7 in all three.
          EXPECT_LE(tt::rel_err(y.data(), ref.data(), n), 1e-5)
              << "op " << op << " cols " << cols << " rows " << rows << " scale " << scale;
          for (size_t i = 0; i < n; ++i) {
            if (op == 2 || int64_t(i % size_t(ld)) < cols) {
              ASSERT_EQ(std::memcmp(&y[i], &yi[i], 4), 0) << "in place differs, op " << op;
            }
          }
        }
      }
    }
  }
}

TEST_P(Softmax, MatchesReferenceAndSumsToOne) { testers::softmax_ops(); }

TEST_P(Softmax, InPlace) {
  // 9 short rows (in groups of two or four, by row length, and one alone), one with a NaN whose
  // max is finite: its exps are computed before its sum shows the NaN.
  const int64_t rows = 9, cols = 37;
  auto x = tt::random_vec(size_t(rows * cols), 9, -5.0f, 5.0f);
  x[5 * cols + 3] = tt::kNaN;
  std::vector<float> ref(x.size());
  tessera::reference::softmax(rows, cols, x.data(), cols, ref.data(), cols, 1.0f);
  ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, x.data(), cols), Status::ok);
  for (int64_t j = 0; j < cols; ++j) {
    EXPECT_TRUE(std::isnan(x[5 * cols + j])) << j;
    x[5 * cols + j] = ref[5 * cols + j] = 0.0f;
  }
  EXPECT_LE(tt::rel_err(x, ref), 1e-5);
}

TEST_P(Softmax, SpecialRowsStayInTheirRow) {
  // Rows: normal, all -inf, one +inf, two +inf, a NaN, some -inf, normal; on the register rows
  // (19 and 128 columns on AVX-512), the exp-store groups (200) and one row at a time.
  for (int64_t cols : {19, 128, 200}) {
    SCOPED_TRACE(cols);
    auto x = tt::random_vec(size_t(7 * cols), 3, -3.0f, 3.0f);
    for (int64_t j = 0; j < cols; ++j) x[1 * cols + j] = -tt::kInf;
    x[2 * cols + 4] = tt::kInf;
    x[3 * cols + 0] = tt::kInf;
    x[3 * cols + 18] = tt::kInf;
    x[4 * cols + 7] = tt::kNaN;
    for (int64_t j = 0; j < cols; j += 2) x[5 * cols + j] = -tt::kInf;
    std::vector<float> y(x.size()), ref(x.size()), ly(x.size()), lse(7);
    ASSERT_EQ(tessera::softmax(7, cols, x.data(), cols, y.data(), cols), Status::ok);
    ASSERT_EQ(tessera::log_softmax(7, cols, x.data(), cols, ly.data(), cols), Status::ok);
    ASSERT_EQ(tessera::logsumexp(7, cols, x.data(), cols, 1.0f, lse.data()), Status::ok);
    tessera::reference::softmax(7, cols, x.data(), cols, ref.data(), cols, 1.0f);
    EXPECT_LE(tt::rel_err(y, ref), 1e-5);
    for (int64_t j = 0; j < cols; ++j) {
      EXPECT_EQ(y[1 * cols + j], 0.0f);
      EXPECT_EQ(ly[1 * cols + j], -tt::kInf);
      EXPECT_EQ(y[2 * cols + j], j == 4 ? 1.0f : 0.0f);
      EXPECT_EQ(y[3 * cols + j], (j == 0 || j == 18) ? 0.5f : 0.0f);
      EXPECT_TRUE(std::isnan(y[4 * cols + j]));
      if (j % 2 == 0) {
        EXPECT_EQ(y[5 * cols + j], 0.0f);
      }
      EXPECT_FALSE(std::isnan(y[6 * cols + j])) << "NaN leaked into the next row";
      EXPECT_FALSE(std::isnan(y[0 * cols + j])) << "NaN leaked into an earlier row";
    }
    EXPECT_EQ(lse[1], -tt::kInf);
    EXPECT_EQ(lse[2], tt::kInf);
    EXPECT_TRUE(std::isnan(lse[4]));
    EXPECT_TRUE(std::isfinite(lse[5]) && std::isfinite(lse[6]) && std::isfinite(lse[0]));
  }
}

TEST_P(Softmax, EmptyShapes) {
  float y = 5.0f, out = 5.0f;
  const float x = 1.0f;
  EXPECT_EQ(tessera::softmax(0, 4, nullptr, 4, nullptr, 4), Status::ok);
  EXPECT_EQ(tessera::logsumexp(1, 0, &x, 1, 1.0f, &out), Status::ok);
  EXPECT_EQ(out, -tt::kInf);  // the empty sum
  EXPECT_EQ(tessera::softmax(1, 1, &x, 1, &y, 1), Status::ok);
  EXPECT_EQ(y, 1.0f);
}

}  // namespace

namespace {

// Rows of 2^16 columns and more are split into chunks merged in order: still the reference's
// numbers, including a special value in the last chunk only.
TEST_P(Softmax, LongRowsAcrossChunks) {
  for (int64_t cols : {65536, 70001, 200000}) {
    auto x = tt::random_vec(size_t(2 * cols), uint32_t(cols), -30.0f, 30.0f);
    std::vector<float> y(x.size()), ref(x.size()), lse(2), lse_ref(2);
    ASSERT_EQ(tessera::softmax(2, cols, x.data(), cols, y.data(), cols, 0.5f), Status::ok);
    tessera::reference::softmax(2, cols, x.data(), cols, ref.data(), cols, 0.5f);
    EXPECT_LE(tt::rel_err(y, ref), 1e-5) << cols;
    ASSERT_EQ(tessera::logsumexp(2, cols, x.data(), cols, 0.5f, lse.data()), Status::ok);
    tessera::reference::logsumexp(2, cols, x.data(), cols, 0.5f, lse_ref.data());
    EXPECT_LE(tt::rel_err(lse, lse_ref), 1e-6) << cols;
    x[size_t(2 * cols - 1)] = tt::kInf;
    ASSERT_EQ(tessera::softmax(2, cols, x.data(), cols, y.data(), cols, 0.5f), Status::ok);
    EXPECT_EQ(y[size_t(2 * cols - 1)], 1.0f);
    EXPECT_EQ(y[size_t(cols)], 0.0f);
    EXPECT_LE(tt::rel_err(y.data(), ref.data(), size_t(cols)), 1e-5) << "row 0 must not change";
  }
}

// Rows of more than 16K columns are done in chunks (exps stored relative to each chunk's max,
// rescaled at the end): special values confined to one chunk, a chunk with no mass, in place.
TEST_P(Softmax, ChunkedRowsSpecialChunksInPlace) {
  const int64_t cols = 40000;  // chunks [0, 16384), [16384, 32768), [32768, 40000)
  auto x = tt::random_vec(size_t(4 * cols), 21, -20.0f, 20.0f);
  for (int64_t j = 16384; j < 32768; ++j) x[size_t(0 * cols + j)] = -tt::kInf;  // empty chunk
  x[size_t(1 * cols + 20000)] = tt::kInf;                                       // middle chunk
  x[size_t(2 * cols + 39999)] = tt::kNaN;                                       // last chunk
  std::vector<float> ref(x.size());
  tessera::reference::softmax(4, cols, x.data(), cols, ref.data(), cols, 1.0f);
  std::vector<float> y = x;
  ASSERT_EQ(tessera::softmax(4, cols, y.data(), cols, y.data(), cols), Status::ok);
  EXPECT_LE(tt::rel_err(y, ref), 1e-6);
  for (int64_t j = 16384; j < 32768; ++j) ASSERT_EQ(y[size_t(j)], 0.0f) << j;
  for (int64_t j = 0; j < cols; ++j) {
    ASSERT_EQ(y[size_t(cols + j)], j == 20000 ? 1.0f : 0.0f) << j;
    ASSERT_TRUE(std::isnan(y[size_t(2 * cols + j)])) << j;
  }
}

// The active row's streaming-store bound (a cache's size: 32 MB on x86, 1-4 MB on the ARM rows)
// in floats, so that a test sized to it stays short under qemu.
int64_t stream_floats() {
  return int64_t(tessera::detail::active_tuning().softmax_stream_bytes / 4);
}

// y against the same rows softmaxed in pieces of fewer rows than the streaming-store bound
// (written to cache): bitwise, every row. The pieces start at rows that are not a multiple of
// the kernels' row group.
void expect_as_cached_pieces(int64_t rows, int64_t cols, const float* x, const float* y) {
  const int64_t piece = stream_floats() / cols / 4 + 3;
  std::vector<float> part(size_t(piece * cols));
  for (int64_t first = 0; first < rows; first += piece) {
    const int64_t r = std::min(piece, rows - first);
    ASSERT_EQ(tessera::softmax(r, cols, x + first * cols, cols, part.data(), cols), Status::ok);
    ASSERT_EQ(std::memcmp(part.data(), y + first * cols, size_t(r * cols) * 4), 0) << first;
  }
}

// The first 8 rows (the special ones among them) against the reference, NaN rows as zeros.
void expect_first_rows_as_the_reference(int64_t cols, const float* x, const float* y) {
  const size_t n = size_t(8 * cols);
  std::vector<float> got(y, y + n), ref(n);
  tessera::reference::softmax(8, cols, x, cols, ref.data(), cols, 1.0f);
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(got[i]) && std::isnan(ref[i])) got[i] = ref[i] = 0.0f;
  EXPECT_LE(tt::rel_err(got, ref), 1e-6);
}

// Outputs from the streaming-store bound on are written with streaming stores from a scratch
// row: the same numbers as rows written to cache, in place too, and special rows still
// rewritten. (Every row bitwise against cached calls; the cached rows' values against the
// reference are the other tests'.)
TEST_P(Softmax, LargeOutputStreamedLikeTheRest) {
  const int64_t cols = 4096, rows = std::max<int64_t>(stream_floats() / cols, 8);
  auto x = tt::random_vec(size_t(rows * cols), 29, -20.0f, 20.0f);
  for (int64_t j = 0; j < cols; ++j) x[size_t(5 * cols + j)] = -tt::kInf;
  x[size_t(6 * cols + 3)] = tt::kNaN;
  x[size_t(7 * cols + 100)] = tt::kInf;
  std::vector<float> y(x.size() + 1);
  // y one float off the vector alignment: the streamed body starts after a scalar head.
  ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, y.data() + 1, cols), Status::ok);
  expect_first_rows_as_the_reference(cols, x.data(), y.data() + 1);
  expect_as_cached_pieces(rows, cols, x.data(), y.data() + 1);
  ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, x.data(), cols), Status::ok);
  EXPECT_EQ(std::memcmp(x.data(), y.data() + 1, x.size() * 4), 0) << "in place";
  EXPECT_EQ(x[size_t(5 * cols)], 0.0f);
  EXPECT_TRUE(std::isnan(x[size_t(6 * cols)]));
  EXPECT_EQ(x[size_t(7 * cols + 100)], 1.0f);
}

// Short rows with an output at the streaming-store bound: the register rows write y with
// streaming stores where it is aligned to the vector. Every row must come out as the same rows
// written to cache (calls under the threshold), special rows included. 16 columns are register
// rows on every ISA, 128 on AVX-512.
TEST_P(Softmax, LargeShortRowsStreamedLikeTheRest) {
  for (int64_t cols : {16, 128}) {
    SCOPED_TRACE(cols);
    const int64_t rows = stream_floats() / cols;
    const size_t n = size_t(rows * cols);
    auto x = tt::random_vec(n, 31, -20.0f, 20.0f);
    for (int64_t j = 0; j < cols; ++j) x[size_t(cols + j)] = -tt::kInf;
    x[size_t(2 * cols + 3)] = tt::kNaN;
    x[size_t(3 * cols + 5)] = tt::kInf;
    std::vector<float> buf(n + 16);
    float* y = buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) / 4 % 16) % 16;
    ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, y, cols), Status::ok);
    EXPECT_EQ(y[cols], 0.0f);
    EXPECT_EQ(y[3 * cols + 5], 1.0f);
    EXPECT_TRUE(std::isnan(y[2 * cols]) && std::isnan(y[3 * cols - 1]));
    expect_first_rows_as_the_reference(cols, x.data(), y);
    expect_as_cached_pieces(rows, cols, x.data(), y);
  }
}

// Within 1e-6 of the reference relative to each row's magnitude (softmax: the row's largest
// probability; log-softmax: its largest |value|, at least 1; logsumexp: |lse|, at least 1), on
// every path: short rows, the exp-store threshold, chunked rows. (Element by element, small
// probabilities cannot meet 1e-6 in any float implementation: exp(a) for a = -40 inherits the
// rounding of a itself, 0.5 ulp(40) = 1.9e-6 relative.)
TEST_P(Softmax, WithinOneMillionthOfTheReference) {
  // SSE2 has no fused multiply-add: scale x rounds at its own magnitude before the row's shift
  // comes off, by up to half an ulp of max |scale x| (2^-20 below 32, here 21) in each exp's
  // argument, and so in each probability relative to itself (measured 17-20 ulp there, against
  // 3-5 where the tables fuse).
  const double tol = GetParam() == "sse2" ? 1e-6 + 0x1p-20 : 1e-6;
  const std::pair<int64_t, int64_t> shapes[] = {{8, 128},   {300, 77},  {40, 16384},
                                                {9, 16385}, {2, 70001}, {1, 200000}};
  for (const auto& [rows, cols] : shapes) {
    const auto x = tt::random_vec(size_t(rows * cols), 23, -30.0f, 30.0f);
    const size_t n = x.size(), nr = static_cast<size_t>(rows);
    std::vector<float> y(n), ly(n), lse(nr), ref(n), lref(n), lse_ref(nr);
    ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, y.data(), cols, 0.7f), Status::ok);
    ASSERT_EQ(tessera::log_softmax(rows, cols, x.data(), cols, ly.data(), cols, 0.7f), Status::ok);
    ASSERT_EQ(tessera::logsumexp(rows, cols, x.data(), cols, 0.7f, lse.data()), Status::ok);
    tessera::reference::softmax(rows, cols, x.data(), cols, ref.data(), cols, 0.7f);
    tessera::reference::log_softmax(rows, cols, x.data(), cols, lref.data(), cols, 0.7f);
    tessera::reference::logsumexp(rows, cols, x.data(), cols, 0.7f, lse_ref.data());
    for (size_t r = 0; r < nr; ++r) {
      double err = 0, err_log = 0, top = 0, top_log = 1;
      for (size_t j = r * size_t(cols); j < (r + 1) * size_t(cols); ++j) {
        err = std::max(err, std::fabs(double(y[j]) - ref[j]));
        top = std::max(top, double(ref[j]));
        err_log = std::max(err_log, std::fabs(double(ly[j]) - lref[j]));
        top_log = std::max(top_log, std::fabs(double(lref[j])));
      }
      EXPECT_LE(err / top, tol) << rows << "x" << cols << " row " << r;
      EXPECT_LE(err_log / top_log, 1e-6) << rows << "x" << cols << " row " << r;
      EXPECT_LE(
          std::fabs(double(lse[r]) - lse_ref[r]) / std::max(1.0, std::fabs(double(lse_ref[r]))),
          1e-6)
          << rows << "x" << cols << " row " << r;
    }
  }
}

// Bitwise identical results for 1, 2 and 8 threads, on short rows, rows on both sides of the
// exp-store threshold, and chunked long rows.
// A row's result must not depend on which rows come with it in a call (short rows go in groups
// of two or four, and how the tasks of a parallel call cut the rows follows the thread count):
// rows 1.. of a call equal, bit for bit, the same rows passed from row 1.
TEST_P(Softmax, RowResultsDoNotDependOnTheirNeighbours) {
  for (int64_t cols : {5, 77, 200, 1000}) {
    const int64_t rows = 11;
    const auto x = tt::random_vec(size_t(rows * cols), 23, -10.0f, 10.0f);
    for (int op = 0; op < 3; ++op) {
      std::vector<float> all(x.size()), tail(x.size());
      auto run = [&](int64_t first, float* out) {
        const float* xs = x.data() + first * cols;
        float* ys = out + first * cols;
        const int64_t n = rows - first;
        if (op == 0) return tessera::softmax(n, cols, xs, cols, ys, cols);
        if (op == 1) return tessera::log_softmax(n, cols, xs, cols, ys, cols);
        return tessera::logsumexp(n, cols, xs, cols, 1.0f, out + first);
      };
      ASSERT_EQ(run(0, all.data()), Status::ok);
      ASSERT_EQ(run(1, tail.data()), Status::ok);
      const size_t from = op == 2 ? 1 : size_t(cols),
                   count = op == 2 ? rows - 1 : (rows - 1) * cols;
      EXPECT_EQ(std::memcmp(all.data() + from, tail.data() + from, count * 4), 0)
          << "op " << op << " cols " << cols;
    }
  }
}

TEST_P(Softmax, BitwiseIdenticalForAnyThreadCount) {
  for (auto shape : {std::pair<int64_t, int64_t>{300, 77}, {40, 16384}, {9, 16385}, {3, 150000}}) {
    const auto [rows, cols] = shape;
    const auto x = tt::random_vec(size_t(rows * cols), 17, -10.0f, 10.0f);
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 8}) {
      std::vector<float> y(x.size()), l(x.size()), lse(static_cast<size_t>(rows));
      tbb::task_arena arena(threads);
      arena.execute([&] {
        ASSERT_EQ(tessera::softmax(rows, cols, x.data(), cols, y.data(), cols), Status::ok);
        ASSERT_EQ(tessera::log_softmax(rows, cols, x.data(), cols, l.data(), cols), Status::ok);
        ASSERT_EQ(tessera::logsumexp(rows, cols, x.data(), cols, 1.0f, lse.data()), Status::ok);
      });
      y.insert(y.end(), l.begin(), l.end());
      y.insert(y.end(), lse.begin(), lse.end());
      out.push_back(std::move(y));
    }
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0)
        << rows << "x" << cols;
    EXPECT_EQ(std::memcmp(out[0].data(), out[2].data(), out[0].size() * 4), 0)
        << rows << "x" << cols;
  }
}

// The merge primitive: states of any split of a row merge to the row's logsumexp, and partial
// outputs merge to the full weighted sum (flash-decoding's combine).
TEST(OnlineSoftmax, MergeOfPartsEqualsWhole) {
  const auto s = tt::random_vec(1000, 3, -20.0f, 20.0f);
  const auto v = tt::random_vec(1000 * 4, 4);
  float lse_ref;
  tessera::reference::logsumexp(1, 1000, s.data(), 1000, 1.0f, &lse_ref);
  for (int parts : {1, 2, 7, 1000}) {
    tessera::OnlineSoftmaxState total;
    std::vector<float> o(4, 0.0f);
    for (int p = 0; p < parts; ++p) {
      tessera::OnlineSoftmaxState part;
      const int j0 = p * 1000 / parts, j1 = (p + 1) * 1000 / parts;
      for (int j = j0; j < j1; ++j) part.add(s[size_t(j)]);
      std::vector<float> po(4, 0.0f);
      for (int j = j0; j < j1; ++j)
        for (int c = 0; c < 4; ++c)
          po[size_t(c)] += std::exp(s[size_t(j)] - part.max) * v[size_t(j * 4 + c)];
      tessera::merge_partial_output(total, o.data(), part, po.data(), 4);
    }
    EXPECT_NEAR(total.lse(), lse_ref, 1e-5f) << parts;
    for (int c = 0; c < 4; ++c) {
      double want = 0.0;
      for (int j = 0; j < 1000; ++j)
        want += std::exp(double(s[size_t(j)]) - lse_ref) * v[size_t(j * 4 + c)];
      EXPECT_NEAR(o[size_t(c)] / total.sum, want, 1e-5) << parts;
    }
  }
  tessera::OnlineSoftmaxState empty, also_empty;
  empty.merge(also_empty);
  EXPECT_EQ(empty.lse(), -tt::kInf);
  empty.add(-tt::kInf);
  EXPECT_EQ(empty.sum, 0.0f);
  empty.add(tt::kNaN);
  EXPECT_TRUE(std::isnan(empty.lse()));
}

}  // namespace

}  // namespace softmax_test

// Rows at the edges of the register rows and the exp-store groups (5 rows: row groups and one
// alone), and a row long enough to be done in chunks, against the reference; the rows sum to 1
// and nothing past cols is written.
void testers::softmax_ops() {
  using namespace softmax_test;
  using tessera::Status;
  // Register-resident rows end at 16 columns on SSE2, 32 on AVX2, 128 on AVX-512 (last vector
  // whole or partial); the exp-store groups take over above; past 16K columns, chunks.
  for (int64_t cols :
       {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 113, 128, 129, 255, 1000, 4099, 40000}) {
    if (mutant_rejected()) return;
    const int64_t rows = 5, ld = cols + 3;
    const auto x = tt::random_vec(size_t(rows * ld), uint32_t(cols), -20.0f, 20.0f);
    for (float scale : {1.0f, 0.125f}) {
      std::vector<float> y(x.size(), 7.0f), ref(x.size(), 7.0f);
      ASSERT_EQ(tessera::softmax(rows, cols, x.data(), ld, y.data(), ld, scale), Status::ok);
      tessera::reference::softmax(rows, cols, x.data(), ld, ref.data(), ld, scale);
      EXPECT_LE(tt::rel_err(y, ref), 1e-5) << "cols " << cols;
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0.0;
        for (int64_t j = 0; j < cols; ++j) sum += y[r * ld + j];
        EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r << " cols " << cols;
        for (int64_t j = cols; j < ld; ++j) EXPECT_EQ(y[r * ld + j], 7.0f) << "wrote past cols";
      }
      ASSERT_EQ(tessera::log_softmax(rows, cols, x.data(), ld, y.data(), ld, scale), Status::ok);
      tessera::reference::log_softmax(rows, cols, x.data(), ld, ref.data(), ld, scale);
      EXPECT_LE(tt::rel_err(y, ref), 1e-5) << "cols " << cols;
      std::vector<float> lse(rows), lse_ref(rows);
      ASSERT_EQ(tessera::logsumexp(rows, cols, x.data(), ld, scale, lse.data()), Status::ok);
      tessera::reference::logsumexp(rows, cols, x.data(), ld, scale, lse_ref.data());
      EXPECT_LE(tt::rel_err(lse, lse_ref), 1e-6) << "cols " << cols;
    }
  }
}
