// One tester per GEMM micro-kernel family, run over every registered kernel of every table this
// CPU runs (src/runtime/registry.hpp): each kernel called directly on the edge lattice of its
// contract (arch/common/gemm_ukernel.hpp, gemm_dot.hpp) - k from 0 past the prefetch distance,
// column counts at the vector edges, A packed, row-major or transposed, padded strides, beta = 0
// over a NaN-poisoned C, and a guard band around C that must come back untouched. Registering a
// kernel in a table is what puts it under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "src/runtime/registry.hpp"
#include "tessera/reference.hpp"
#include "test_util.hpp"
#include "testers.hpp"

namespace ukernel_test {

namespace {

namespace arch = tessera::arch;
using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;

constexpr float kGuard = -7777.0f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Scalars {
  float alpha, beta;
};
constexpr Scalars kScalars[] = {{1.0f, 0.0f}, {-0.5f, 1.0f}, {2.0f, 0.3f}};

// One call of a kernel: C (r x nr, rows ldc apart, inside a guard band) against the double sum
// of the same A(i, p) and B(p, j) accessors.
struct Case {
  int64_t r, nr, k, ldc;
  Scalars s;
};

template <class AAt, class BAt, class Call>
void check(const KernelRow& row, const Case& cs, AAt a_at, BAt b_at, Call call, const char* what) {
  const int64_t rows = cs.r + 2, ldc = cs.ldc;
  std::vector<float> c(size_t(rows * ldc), kGuard);
  auto at = [&](int64_t i, int64_t j) -> float& { return c[size_t((i + 1) * ldc + j + 1)]; };
  std::vector<float> c0(size_t(cs.r * cs.nr));
  for (int64_t i = 0; i < cs.r; ++i)
    for (int64_t j = 0; j < cs.nr; ++j)
      at(i, j) = c0[size_t(i * cs.nr + j)] =
          cs.s.beta == 0.0f ? kNaN : float(std::sin(double(i * 7 + j)));
  call(&at(0, 0));
  int bad = 0;
  for (int64_t i = -1; i <= cs.r; ++i)
    for (int64_t j = -1; j < ldc - 1; ++j) {
      const bool inside = i >= 0 && i < cs.r && j >= 0 && j < cs.nr;
      const float got = at(i, j);
      if (!inside) {
        if (got != kGuard && ++bad <= 3)
          ADD_FAILURE() << row.name << " " << what << ": wrote outside C at (" << i << ", " << j
                        << ")";
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < cs.k; ++p) {
        const double ab = double(a_at(i, p)) * double(b_at(p, j));
        sum += ab, mag += std::fabs(ab);
      }
      const double c_in = cs.s.beta == 0.0f ? 0.0 : double(c0[size_t(i * cs.nr + j)]);
      const double want = double(cs.s.alpha) * sum + double(cs.s.beta) * c_in;
      const double bound = 2.0 * std::sqrt(double(std::max<int64_t>(cs.k, 1))) * 1.2e-7 *
                               (std::fabs(cs.s.alpha) * mag + std::fabs(cs.s.beta * c_in)) +
                           1e-30;
      if (!(std::fabs(double(got) - want) <= bound) && ++bad <= 3)
        ADD_FAILURE() << row.name << " " << what << ": C(" << i << ", " << j << ") = " << got
                      << ", want " << want << " (k " << cs.k << ", nr " << cs.nr << ", alpha "
                      << cs.s.alpha << ", beta " << cs.s.beta << ")";
    }
}

std::vector<float> data(size_t n, uint32_t seed) { return tt::random_vec(n, seed); }

// Column counts at the edges of the vectors and of the tile, within 1..cols.
std::vector<int64_t> column_counts(int64_t cols, int64_t w) {
  std::set<int64_t> s{1, cols};
  for (int64_t c : {w - 1, w, w + 1, cols - 1})
    if (c >= 1 && c <= cols) s.insert(c);
  return {s.begin(), s.end()};
}

constexpr int64_t kKs[] = {0, 1, 3, 17, 64, 257};

void test_packed(const KernelRow& row, int64_t w) {
  const auto fn = reinterpret_cast<arch::GemmPackedFn>(row.fn);
  const bool rows_bk = row.family == KernelFamily::gemm_rows_bk;
  const int64_t a_rs = rows_bk ? arch::kAttentionBK : 1, a_cs = rows_bk ? 1 : row.mr;
  int combo = 0;
  for (int64_t k : kKs) {
    if (rows_bk) k = std::min<int64_t>(k, arch::kAttentionBK);  // a P row holds BK keys
    for (int64_t nr : column_counts(row.cols, w)) {
      const Scalars s = kScalars[combo++ % 3];
      const int64_t ldb = row.ldb;
      const auto a = data(size_t((row.rows + 1) * a_rs + k * a_cs + 1), uint32_t(combo));
      // B panel rows are ldb floats; columns past nr are zero (a padded panel).
      auto b = data(size_t(k * ldb + 1), uint32_t(combo + 100));
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = nr; j < ldb; ++j) b[size_t(p * ldb + j)] = 0.0f;
      check(
          row, {row.rows, nr, k, row.cols + 3, s},
          [&](int64_t i, int64_t p) { return a[size_t(i * a_rs + p * a_cs)]; },
          [&](int64_t p, int64_t j) { return b[size_t(p * ldb + j)]; },
          [&](float* c) { fn(k, a.data(), b.data(), c, row.cols + 3, nr, s.alpha, s.beta); },
          "packed");
    }
  }
}

// r rows against 1 to 2P + 1 packed panels (P = cols / NR read at once: whole groups and the
// single panels after them), the last panel whole or partial, A row-major or transposed
// (strided); the panels float32 or 16-bit (Elem, from `narrow`, read back by `widen`), f16
// subnormals every 7th.
template <class Fn, class Elem, class Narrow, class Widen>
void test_row_panels_of(const KernelRow& row, Narrow narrow, Widen widen) {
  const auto fn = reinterpret_cast<Fn>(row.fn);
  const int64_t NR = row.ldb, P = row.cols / NR;
  int combo = 0;
  for (int64_t k : kKs)
    for (int64_t panels : {int64_t(1), P - 1, P, P + 1, 2 * P + 1}) {
      if (panels < 1) continue;
      for (int64_t cols : {panels * NR, panels * NR - 1, (panels - 1) * NR + 1}) {
        const Scalars s = kScalars[combo++ % 3];
        const bool a_trans = combo % 2 == 0;
        const int64_t R = row.rows, lda = (a_trans ? R : k) + 2;
        const int64_t a_rs = a_trans ? 1 : lda, a_cs = a_trans ? lda : 1;
        const auto a = data(size_t((a_trans ? k : R) * lda + 1), uint32_t(combo));
        const auto f = data(size_t(panels * NR * k + 1), uint32_t(combo + 100));
        std::vector<Elem> b;
        for (size_t i = 0; i < f.size(); ++i)
          b.push_back(narrow(f[i] * (sizeof(Elem) == 2 && i % 7 == 3 ? 1e-6f : 1.0f)));
        const auto b_at = [&](int64_t p, int64_t j) -> Elem& {
          return b[size_t(j / NR * NR * k + p * NR + j % NR)];
        };
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = cols; j < panels * NR; ++j) b_at(p, j) = Elem(0);  // the padding
        check(
            row, {R, cols, k, cols + 3, s},
            [&](int64_t i, int64_t p) { return a[size_t(i * a_rs + p * a_cs)]; },
            [&](int64_t p, int64_t j) { return widen(b_at(p, j)); },
            [&](float* c) {
              fn(k, a.data(), a_rs, a_cs, b.data(), panels, c, cols + 3, cols, s.alpha, s.beta);
            },
            "row panels");
        if (::testing::Test::HasFailure()) return;
      }
    }
}

void test_row_panels(const KernelRow& row) {
  const auto same = [](float x) { return x; };
  namespace ref = tessera::reference;
  switch (row.family) {
    case KernelFamily::gemm_row_panels:
      return test_row_panels_of<arch::GemmRowPanelsFn, float>(row, same, same);
    case KernelFamily::gemm_row_panels_b_f16:
      return test_row_panels_of<arch::GemmRowPanels16Fn, uint16_t>(row, ref::f32_to_f16,
                                                                   ref::f16_to_f32);
    default:
      return test_row_panels_of<arch::GemmRowPanels16Fn, uint16_t>(row, ref::f32_to_bf16,
                                                                   ref::bf16_to_f32);
  }
}

void test_strided(const KernelRow& row, int64_t w) {
  const auto fn = reinterpret_cast<arch::GemmStridedFn>(row.fn);
  int combo = 0;
  for (bool trans : {false, true})
    for (int64_t k : kKs)
      for (int64_t nr : column_counts(row.cols, w)) {
        const Scalars s = kScalars[combo++ % 3];
        const int64_t lda = trans ? row.rows + 2 : k + 3;  // padded
        const int64_t a_rs = trans ? 1 : lda, a_cs = trans ? lda : 1;
        const int64_t ldb = row.cols + (combo % 2 ? 5 : 0);
        const auto a = data(size_t((trans ? k : row.rows) * lda + 1), uint32_t(combo));
        // Every B row holds cols readable floats (the contract); only nr are used.
        const auto b = data(size_t(std::max<int64_t>(k, 1) * ldb), uint32_t(combo + 100));
        check(
            row, {row.rows, nr, k, row.cols + 3, s},
            [&](int64_t i, int64_t p) { return a[size_t(i * a_rs + p * a_cs)]; },
            [&](int64_t p, int64_t j) { return b[size_t(p * ldb + j)]; },
            [&](float* c) {
              fn(k, a.data(), a_rs, a_cs, b.data(), ldb, c, row.cols + 3, nr, s.alpha, s.beta);
            },
            trans ? "strided A^T" : "strided");
      }
}

// The rows a 16-bit kernel prefetches alongside its own, in every other combination: rows of
// NaN as long as B's (a hint: a kernel that read them instead of prefetching would return NaN),
// or none.
arch::RowsAhead rows_ahead(int combo, const std::vector<uint16_t>& b, int64_t ldb) {
  static std::vector<uint16_t> nan;
  nan.assign(b.size(), 0x7fc0);  // NaN in f16 and in bf16
  if (combo % 2) return {};
  return {reinterpret_cast<const uint8_t*>(nan.data()), 2 * ldb};
}

// B stored as Elem (float, or f16/bf16 widened by `widen`), rows ldb apart: k over the lattice,
// against the double sum of the widened B. 16-bit B values span magnitudes, with f16
// subnormals every 7th.
template <class Fn, class Elem, class Narrow, class Widen>
void test_dot_of(const KernelRow& row, const char* what, Narrow narrow, Widen widen) {
  const auto fn = reinterpret_cast<Fn>(row.fn);
  int combo = 0;
  for (int64_t k :
       {int64_t(0), int64_t(1), int64_t(5), int64_t(17), int64_t(64), int64_t(128), int64_t(257)}) {
    const Scalars s = kScalars[combo++ % 3];
    const int64_t lda = k + 2, ldb = k + 1;
    const auto a = data(size_t(row.rows * lda + 1), uint32_t(combo));
    const auto f = data(size_t(row.cols * ldb + 1), uint32_t(combo + 100));
    std::vector<Elem> b;
    for (size_t i = 0; i < f.size(); ++i)
      b.push_back(narrow(f[i] * (sizeof(Elem) == 2 && i % 7 == 3 ? 1e-6f : 1.0f)));
    check(
        row, {row.rows, row.cols, k, row.cols + 3, s},
        [&](int64_t i, int64_t p) { return a[size_t(i * lda + p)]; },
        [&](int64_t p, int64_t j) { return widen(b[size_t(j * ldb + p)]); },
        [&](float* c) {
          if constexpr (std::is_same_v<Fn, arch::GemmDot16Fn>)  // every other k with rows ahead
            fn(k, a.data(), lda, b.data(), ldb, c, row.cols + 3, s.alpha, s.beta,
               rows_ahead(combo, b, ldb));
          else
            fn(k, a.data(), lda, b.data(), ldb, c, row.cols + 3, s.alpha, s.beta);
        },
        what);
  }
}

void test_dot(const KernelRow& row) {
  const auto same = [](float x) { return x; };
  test_dot_of<arch::GemmDotFn, float>(row, "dot", same, same);
}

void test_dot16(const KernelRow& row, bool bf16) {
  namespace ref = tessera::reference;
  if (bf16)
    test_dot_of<arch::GemmDot16Fn, uint16_t>(row, "dot16", ref::f32_to_bf16, ref::bf16_to_f32);
  else
    test_dot_of<arch::GemmDot16Fn, uint16_t>(row, "dot16", ref::f32_to_f16, ref::f16_to_f32);
}

// Few rows against a 16-bit B read in place: k over the lattice, every column count up to the
// kernel's width (partial last vectors), A row-major and transposed, padded strides, B's rows in
// one run or split into up to four (some of one row, stored in reverse order, apart).
void test_wide16(const KernelRow& row, bool bf16) {
  const auto fn = reinterpret_cast<arch::GemmStrided16Fn>(row.fn);
  int combo = 0;
  for (int64_t k : {int64_t(0), int64_t(1), int64_t(7), int64_t(33), int64_t(256)})
    for (int64_t nr = 1; nr <= row.cols; ++nr) {
      const Scalars s = kScalars[combo++ % 3];
      const bool a_trans = combo % 2;
      const int64_t lda = (a_trans ? row.rows : k) + 1, ldb = row.cols + 5;
      const auto a = data(size_t((a_trans ? k : row.rows) * lda + 1), uint32_t(combo));
      const int runs = k < 7 ? 1 : 1 + combo % arch::kMaxB16Runs;
      const auto f = data(size_t((k + runs) * ldb), uint32_t(combo + 50));
      std::vector<uint16_t> b;
      for (float x : f)
        b.push_back(bf16 ? tessera::reference::f32_to_bf16(x) : tessera::reference::f32_to_f16(x));
      // Run g: rows [end[g - 1], end[g]) (the first of one row, the last the longest), stored
      // a row apart in reverse order.
      arch::B16Rows rows{};
      rows.count = runs, rows.ld = ldb;
      const arch::RowsAhead ahead = rows_ahead(combo / 2, b, ldb);
      std::vector<int64_t> stored(static_cast<size_t>(k));
      int64_t start = 0;
      for (int g = 0; g < runs; ++g) {
        const int64_t end = g + 1 == runs ? k : start + 1 + g;
        const int64_t at = k + runs - end - g;  // runs after it first, a row between
        rows.at[g] = b.data() + at * ldb, rows.end[g] = end;
        rows.ahead[g] = ahead;
        for (int64_t p = start; p < end; ++p) stored[size_t(p)] = at + p - start;
        start = end;
      }
      auto widen = [&](uint16_t h) {
        return bf16 ? tessera::reference::bf16_to_f32(h) : tessera::reference::f16_to_f32(h);
      };
      const int64_t a_rs = a_trans ? 1 : lda, a_cs = a_trans ? lda : 1;
      check(
          row, {row.rows, nr, k, row.cols + 3, s},
          [&](int64_t i, int64_t p) { return a[size_t(i * a_rs + p * a_cs)]; },
          [&](int64_t p, int64_t j) { return widen(b[size_t(stored[size_t(p)] * ldb + j)]); },
          [&](float* c) {
            fn(k, a.data(), a_rs, a_cs, rows, c, row.cols + 3, nr, s.alpha, s.beta);
          },
          "wide16");
      if (::testing::Test::HasFailure()) return;
    }
}

// Few rows against B streamed row by row (float32 or 16-bit, Elem): k below, at and past the
// kernel's block of rows (at most 8) and its prefetch distance, n one to several whole vectors,
// A row-major and transposed, padded strides, and the sums scratch poisoned with NaN (the first
// block must not read it).
template <class Fn, class Elem, class Narrow, class Widen>
void test_stream_of(const KernelRow& row, Narrow narrow, Widen widen, const char* what) {
  const auto fn = reinterpret_cast<Fn>(row.fn);
  int combo = 0;
  for (int64_t k : {int64_t(1), int64_t(3), int64_t(8), int64_t(13), int64_t(70)})
    for (int64_t vectors : {int64_t(1), int64_t(3), int64_t(9)}) {
      const Scalars s = kScalars[combo++ % 3];
      const bool a_trans = combo % 2;
      const int64_t n = vectors * row.cols, lda = (a_trans ? row.rows : k) + 1, ldb = n + 5;
      const auto a = data(size_t((a_trans ? k : row.rows) * lda + 1), uint32_t(combo));
      const auto f = data(size_t(k * ldb), uint32_t(combo + 70));
      std::vector<Elem> b;
      for (float x : f) b.push_back(narrow(x));
      std::vector<float> acc(size_t(row.rows * n), kNaN);
      const int64_t a_rs = a_trans ? 1 : lda, a_cs = a_trans ? lda : 1;
      check(
          row, {row.rows, n, k, n + 3, s},
          [&](int64_t i, int64_t p) { return a[size_t(i * a_rs + p * a_cs)]; },
          [&](int64_t p, int64_t j) { return widen(b[size_t(p * ldb + j)]); },
          [&](float* c) {
            fn(k, a.data(), a_rs, a_cs, b.data(), ldb, acc.data(), c, n + 3, n, s.alpha, s.beta);
          },
          what);
      if (::testing::Test::HasFailure()) return;
    }
}

void test_stream(const KernelRow& row) {
  const auto same = [](float x) { return x; };
  namespace ref = tessera::reference;
  switch (row.family) {
    case KernelFamily::gemm_rows_stream:
      return test_stream_of<arch::GemmStreamFn, float>(row, same, same, "stream");
    case KernelFamily::gemm_rows_stream_b_f16:
      return test_stream_of<arch::GemmStream16Fn, uint16_t>(row, ref::f32_to_f16, ref::f16_to_f32,
                                                            "stream16");
    default:
      return test_stream_of<arch::GemmStream16Fn, uint16_t>(row, ref::f32_to_bf16, ref::bf16_to_f32,
                                                            "stream16");
  }
}

// x rounded to the nearest f16 (ties to even), as a double; |x| past the f16 range gives inf.
double round_f16(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::max(std::ilogb(x), -14);  // below 2^-14 the spacing stays 2^-24
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, 10 - e)), e - 10);
  return std::fabs(r) > 65504.0 ? std::copysign(INFINITY, x) : r;
}

// hgemm_packed: f16 panels, float32 C, the sums in fp16 chunks; within tessera_hgemm's bound
// (less its final rounding to f16).
void test_hgemm(const KernelRow& row) {
  namespace ref = tessera::reference;
  const auto fn = reinterpret_cast<arch::HgemmPackedFn>(row.fn);
  const auto half = [](float x) { return ref::f32_to_f16(x); };
  const double u = std::ldexp(1.0, -11);
  int combo = 0;
  for (int64_t k : kKs)
    for (int64_t nr : column_counts(row.cols, 8)) {
      const Scalars s = kScalars[combo++ % 3];
      const auto af = data(size_t(k * row.mr + 1), uint32_t(combo));
      auto bf = data(size_t(k * row.ldb + 1), uint32_t(combo + 100));
      std::vector<uint16_t> a(af.size()), b(bf.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = half(af[i]);
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < row.ldb; ++j)
          b[size_t(p * row.ldb + j)] = j < nr ? half(bf[size_t(p * row.ldb + j)]) : 0;
      const int64_t ldc = row.cols + 3;
      std::vector<float> c(size_t((row.rows + 2) * ldc), kGuard), c0;
      for (int64_t i = 0; i < row.rows; ++i)
        for (int64_t j = 0; j < nr; ++j)
          c[size_t((i + 1) * ldc + j)] = s.beta == 0.0f ? kNaN : std::sin(float(i + 3 * j));
      c0 = c;
      fn(k, a.data(), b.data(), c.data() + ldc, ldc, nr, s.alpha, s.beta);
      int bad = 0;
      const double ch = double(std::min<int64_t>(k, 64));
      const double g = ch * u / (1.0 - ch * u),
                   e = std::ldexp(std::ceil(double(k) / std::max(ch, 1.0)), -22);
      for (int64_t i = -1; i <= row.rows; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          const size_t at = size_t((i + 1) * ldc + j);
          if (i < 0 || i == row.rows || j >= nr) {
            if (c[at] != kGuard && ++bad <= 3) ADD_FAILURE() << row.name << ": wrote outside C";
            continue;
          }
          double sum = 0, mag = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double ab = double(ref::f16_to_f32(a[size_t(p * row.mr + i)])) *
                              double(ref::f16_to_f32(b[size_t(p * row.ldb + j)]));
            sum += ab, mag += std::fabs(ab);
          }
          const double cin = s.beta == 0.0f ? 0.0 : double(c0[at]);
          const double want = double(s.alpha) * sum + double(s.beta) * cin;
          const double bound =
              1.01 * (std::fabs(s.alpha) * mag * (g + e) + std::fabs(s.beta * cin) * e +
                      u * std::fabs(want) +
                      double(k + 1) * std::ldexp(1.0, -25) * (std::fabs(s.alpha) + 1));
          const double got = c[at];
          if (s.alpha == 1.0f && s.beta == 0.0f) {
            // The contract's order exactly: each chunk an fp16 FMA chain, the chunks added in
            // float32 (the first one stored).
            float want32 = 0.0f;
            for (int64_t p0 = 0; p0 < k || p0 == 0; p0 += 64) {
              double chain = 0.0;  // an f16 value; a product of two f16 is exact in double
              for (int64_t p = p0; p < std::min<int64_t>(k, p0 + 64); ++p)
                chain = round_f16(chain + double(ref::f16_to_f32(a[size_t(p * row.mr + i)])) *
                                              double(ref::f16_to_f32(b[size_t(p * row.ldb + j)])));
              want32 = p0 == 0 ? float(chain) : want32 + float(chain);
            }
            if (got != double(want32) && ++bad <= 3)
              ADD_FAILURE() << row.name << ": C(" << i << ", " << j << ") = " << got
                            << ", the fp16 chain gives " << want32 << " (k " << k << ")";
          }
          if (!(std::fabs(got - want) <= bound) && ++bad <= 3)
            ADD_FAILURE() << row.name << ": C(" << i << ", " << j << ") = " << got << ", want "
                          << want << " (k " << k << ", nr " << nr << ")";
        }
    }
}

// gemm_bf16_dot_packed: bf16 panels of k pairs packed by the table's own packer, from a
// source in either layout, and checked against the contract's panel layout element by element
// (pairs, odd k's zero, zero lanes past the edge); then the kernel against the double sum of the
// same bf16 values.
void test_bf16_dot(const KernelRow& row, const arch::Bf16DotKernels& d) {
  namespace ref = tessera::reference;
  const auto fn = reinterpret_cast<arch::Bf16DotPackedFn>(row.fn);
  const auto bf16 = [](const std::vector<float>& f) {
    std::vector<uint16_t> h(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = ref::f32_to_bf16(f[i]);
    return h;
  };
  // Packs a lanes x k source (element (l, p) at (l, p) of a matrix stored k_rows ? k x lanes :
  // lanes x k, rows ld apart) and checks the panel.
  const auto pack = [&](bool k_rows, int64_t lanes, int64_t k, const std::vector<uint16_t>& src,
                        int64_t ld, int64_t width) {
    const int64_t pairs = (k + 1) / 2;
    std::vector<uint16_t> panel(size_t(pairs * 2 * width + 1), 0xdead);
    d.pack(k_rows, lanes, k, src.data(), ld, width, panel.data());
    int bad = 0;
    for (int64_t p = 0; p < 2 * pairs; ++p)
      for (int64_t l = 0; l < width; ++l) {
        const uint16_t want =
            p < k && l < lanes ? src[size_t(k_rows ? p * ld + l : l * ld + p)] : uint16_t(0);
        const uint16_t got = panel[size_t(p / 2 * 2 * width + 2 * l + p % 2)];
        if (got != want && ++bad <= 3)
          ADD_FAILURE() << row.name << ": packed (lane " << l << ", k " << p << ") = " << got
                        << ", want " << want << (k_rows ? " (k rows)" : " (lane rows)");
      }
    if (panel.back() != 0xdead) ADD_FAILURE() << row.name << ": the packer wrote past the panel";
    return panel;
  };
  int combo = 0;
  for (int64_t k : kKs)
    for (int64_t nr : column_counts(row.cols, 16)) {
      const Scalars s = kScalars[combo++ % 3];
      const bool a_trans = combo % 2 == 0, b_trans = combo % 3 == 0;
      const int64_t R = row.rows, lda = (a_trans ? R : k) + 3, ldb = (b_trans ? k : nr) + 5;
      const auto a = bf16(data(size_t((a_trans ? k : R) * lda + 1), uint32_t(combo)));
      const auto b = bf16(data(size_t((b_trans ? nr : k) * ldb + 1), uint32_t(combo + 100)));
      const auto ap = pack(a_trans, R, k, a, lda, row.mr);
      const auto bp = pack(!b_trans, nr, k, b, ldb, row.ldb);
      check(
          row, {R, nr, k, row.cols + 3, s},
          [&](int64_t i, int64_t p) {
            return ref::bf16_to_f32(a[size_t(a_trans ? p * lda + i : i * lda + p)]);
          },
          [&](int64_t p, int64_t j) {
            return ref::bf16_to_f32(b[size_t(b_trans ? j * ldb + p : p * ldb + j)]);
          },
          [&](float* c) {
            fn((k + 1) / 2, ap.data(), bp.data(), c, row.cols + 3, nr, s.alpha, s.beta);
          },
          "bf16 dot");
    }
}

// gemm_bf16_dot_nt: bf16 rows against bf16 B^T, k across the 32-element steps and their masked
// tail, padded strides; as test_dot_of with A in bf16 too.
void test_bf16_dot_nt(const KernelRow& row) {
  namespace ref = tessera::reference;
  const auto fn = reinterpret_cast<arch::Bf16DotNtFn>(row.fn);
  int combo = 0;
  for (int64_t k : {int64_t(0), int64_t(1), int64_t(5), int64_t(31), int64_t(32), int64_t(64),
                    int64_t(128), int64_t(257)}) {
    const Scalars s = kScalars[combo++ % 3];
    const int64_t lda = k + 2, ldb = k + 1;
    std::vector<uint16_t> a, b;
    for (float x : data(size_t(row.rows * lda + 1), uint32_t(combo)))
      a.push_back(ref::f32_to_bf16(x));
    for (float x : data(size_t(row.cols * ldb + 1), uint32_t(combo + 100)))
      b.push_back(ref::f32_to_bf16(x));
    check(
        row, {row.rows, row.cols, k, row.cols + 3, s},
        [&](int64_t i, int64_t p) { return ref::bf16_to_f32(a[size_t(i * lda + p)]); },
        [&](int64_t p, int64_t j) { return ref::bf16_to_f32(b[size_t(j * ldb + p)]); },
        [&](float* c) { fn(k, a.data(), lda, b.data(), ldb, c, row.cols + 3, s.alpha, s.beta); },
        "bf16 dot nt");
  }
}

// Every f16 value through each table's widening load: one row of 1.0 against B's values (k = 1,
// the wide16 kernel), so C is each widened value exactly (1 x v) against the reference's
// conversion; NaN stays NaN (its payload is the arithmetic's: ARMv7 NEON returns
// the default NaN). Subnormals, the values the ARMv7 form computes apart, included.
TEST(Ukernel, EveryF16ValueWidensExactly) {
  for (const std::string& isa : tt::isas()) {
    const auto* t = tessera::detail::find_table(isa.c_str());
    ASSERT_NE(t, nullptr);
    const arch::GemmKernels& g = t->gemm;
    const int64_t cols = g.wide16_cols;
    std::vector<uint16_t> b(size_t(65536 + cols));
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint16_t(i);
    std::vector<float> c(static_cast<size_t>(cols));
    const float one = 1.0f;
    int bad = 0;
    for (int64_t j0 = 0; j0 < 65536; j0 += cols) {
      g.wide16[0][1](1, &one, 1, 1, arch::B16Rows::matrix(b.data() + j0, 1, cols), c.data(), cols,
                     cols, 1.0f, 0.0f);
      for (int64_t j = 0; j < cols && j0 + j < 65536; ++j) {
        const float want = tessera::reference::f16_to_f32(uint16_t(j0 + j));
        // == : the sum 0 + 1 x (-0) is +0 on any table; every other value exactly.
        const bool same = std::isnan(want) ? std::isnan(c[size_t(j)]) : c[size_t(j)] == want;
        if (!same && ++bad <= 3)
          ADD_FAILURE() << isa << ": f16 0x" << std::hex << (j0 + j) << std::dec << " widened to "
                        << c[size_t(j)] << ", want " << want;
      }
    }
  }
}

}  // namespace

}  // namespace ukernel_test

// The tester of the registered kernel's family: the kernel called directly on its contract's
// edge lattice (the conversions: convert_test.cpp).
void testers::registered_kernel(const tessera::detail::KernelRow& row) {
  using namespace ukernel_test;
  const auto* t = tessera::detail::find_table(row.table);
  ASSERT_NE(t, nullptr) << row.table;
  const int64_t w = t->simd_floats;
  switch (row.family) {
    case KernelFamily::gemm_packed:
    case KernelFamily::gemm_packed_narrow:
    case KernelFamily::gemm_rows_bk:
      return test_packed(row, w);
    case KernelFamily::gemm_row_panels:
    case KernelFamily::gemm_row_panels_b_f16:
    case KernelFamily::gemm_row_panels_b_bf16:
      return test_row_panels(row);
    case KernelFamily::gemm_strided:
    case KernelFamily::gemm_strided_narrow:
    case KernelFamily::gemm_wide:
    case KernelFamily::gemm_wide_prefetching:
      return test_strided(row, w);
    case KernelFamily::gemm_dot:
    case KernelFamily::gemm_dot_stream:
      return test_dot(row);
    case KernelFamily::gemm_dot_b_f16:
    case KernelFamily::gemm_dot_b_bf16:
      return test_dot16(row, row.family == KernelFamily::gemm_dot_b_bf16);
    case KernelFamily::gemm_wide_b_f16:
    case KernelFamily::gemm_wide_b_bf16:
      return test_wide16(row, row.family == KernelFamily::gemm_wide_b_bf16);
    case KernelFamily::gemm_rows_stream:
    case KernelFamily::gemm_rows_stream_b_f16:
    case KernelFamily::gemm_rows_stream_b_bf16:
      return test_stream(row);
    case KernelFamily::hgemm_packed:
      return test_hgemm(row);
    case KernelFamily::gemm_bf16_dot_packed:
      return test_bf16_dot(row, t->bf16dot);
    case KernelFamily::gemm_bf16_dot_nt:
      return test_bf16_dot_nt(row);
    case KernelFamily::convert_f32_f16:
    case KernelFamily::convert_f16_f32:
    case KernelFamily::convert_f32_bf16:
    case KernelFamily::convert_bf16_f32:
      return testers::convert_kernel(row);
    case KernelFamily::quant_dot_q8_0:
    case KernelFamily::quant_dot_q4_0:
    case KernelFamily::quant_pv_q8_0:
    case KernelFamily::quant_pv_q4_0:
    case KernelFamily::quantize_q8_0:
    case KernelFamily::quantize_q4_0:
    case KernelFamily::dequantize_q8_0:
    case KernelFamily::dequantize_q4_0:
    case KernelFamily::quantize_rows_q8_0:
    case KernelFamily::quant_gemm_q8_0:  // (quant_kernel routes the GEMM tiles on)
    case KernelFamily::quant_gemm_q4_0:
    case KernelFamily::quant_gemm_pack_q8_0:
    case KernelFamily::quant_gemm_pack_q4_0:
      return testers::quant_kernel(row);
    case KernelFamily::rope_angles_neox:
    case KernelFamily::rope_angles_gptj:
    case KernelFamily::rope_rotate_neox:
    case KernelFamily::rope_rotate_gptj:
      return testers::rope_kernel(row);
    case KernelFamily::norm_rms:
    case KernelFamily::norm_layer:
    case KernelFamily::act_silu:
    case KernelFamily::act_gelu_tanh:
      return testers::norm_act_kernel(row);
    case KernelFamily::count:
      break;
  }
  FAIL() << row.name << ": no tester for its family";
}

namespace ukernel_test {

namespace {

TEST(Ukernel, EveryRegisteredKernelOnItsEdgeLattice) {
  const auto registry = tessera::detail::kernel_registry();
  ASSERT_FALSE(registry.empty());
  std::set<std::string> tables, names;
  for (const KernelRow& row : registry) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "registered twice: " << row.name;
    tables.insert(row.table);
    testers::registered_kernel(row);
    if (::testing::Test::HasFailure()) return;
  }
  // Every table the CPU runs is in the registry.
  EXPECT_EQ(tables.size(), tt::all_isas().size());
  std::printf("%zu registered micro-kernels tested on tables:", registry.size());
  for (const auto& t : tables) std::printf(" %s", t.c_str());
  std::printf("\n");
}

}  // namespace

}  // namespace ukernel_test
