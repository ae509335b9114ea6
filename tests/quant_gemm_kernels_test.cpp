// The packed GEMM tiles of block-type weights (QGemmFn, QGemmPackFn: arch/x86/qgemm_*.hpp,
// arch/arm/qgemm_sdot.hpp) over the registry: the packer byte for byte against the layout its
// contract states, written here value by value; the tile on panels packed by that layout,
// against double sums of the stored integers and scales (rows of any q in [-127, 127], weights
// of any bytes), over rows, columns, blocks, alpha and beta, with a guard around C.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/runtime/dispatch.hpp"
#include "src/runtime/registry.hpp"
#include "tessera/reference.hpp"
#include "testers.hpp"

namespace quant_gemm_kernels_test {

namespace {

namespace arch = tessera::arch;
namespace ref = tessera::reference;
using tessera::detail::KernelFamily;
using tessera::detail::KernelRow;

constexpr float kGuard = -7777.0f;
constexpr int64_t kBlockBytes[2] = {34, 18};

// rows weight rows of `blocks` random blocks (any bytes, finite scales), ld bytes apart.
std::vector<uint8_t> random_rows(int t, int64_t rows, int64_t blocks, int64_t ld, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(size_t(rows * ld + 1));
  for (auto& x : b) x = uint8_t(gen());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < blocks; ++i) {
      const float d = std::ldexp(float(int(gen() % 200) - 100) / 100.0f, int(gen() % 6) - 3);
      const uint16_t h = ref::f32_to_f16(d);
      std::memcpy(&b[size_t(r * ld + i * kBlockBytes[t])], &h, 2);
    }
  return b;
}
int value(int t, const uint8_t* blk, int i) {
  return t == 0 ? int(int8_t(blk[2 + i])) : int((blk[2 + i % 16] >> (4 * (i / 16))) & 15) - 8;
}

// The tile's layout (arch/*/qgemm_*.hpp), value by value, for nr columns, the table's offset and
// run G (QuantKernels::gemm_group): the nr scales, then per value i of column c the offset value
// (q8_0: q + off, q4_0: n = q + 8) at group i / G (q4_0: (i % 16) / G, the high nibble for
// i >= 16), run c, byte i % G: runs G bytes and groups G nr bytes apart.
struct Layout {
  int64_t nr, block_bytes;
  int32_t offset, bias;
  int group;
  bool a_words;
};
Layout layout_of(const KernelRow& row, int t) {
  const arch::QuantKernels& q = tessera::detail::find_table(row.table)->quant;
  return {q.gemm_nr,    q.gemm_block_bytes[t], q.gemm_offset[t], q.gemm_start_bias[t],
          q.gemm_group, q.gemm_a_words};
}

// A's rows as the tile reads them (QGemmRows): in place, or copied interleaved by words of the
// table's run G, in vectors of their exact size (a read past them is the sanitizers' to catch).
struct TileRows {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> start;
  arch::QGemmRows a;
  TileRows(const Layout& l, int R, int64_t blocks, const std::vector<int8_t>& q, int64_t lda,
           const std::vector<float>& dq, const std::vector<int32_t>& st) {
    if (!l.a_words) {
      a = {q.data(), lda, dq.data(), st.data(), blocks};
      return;
    }
    qs.resize(size_t(R * blocks * 32)), d.resize(dq.size()), start.resize(st.size());
    const int G = l.group;
    for (int r = 0; r < R; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        for (int w = 0; w < 32 / G; ++w)
          std::memcpy(&qs[size_t(32 * R * b + G * (w * R + r))],
                      &q[size_t(r * lda + 32 * b + G * w)], size_t(G));
        d[size_t(R * b + r)] = dq[size_t(r * blocks + b)];
        start[size_t(R * b + r)] = st[size_t(r * blocks + b)];
      }
    a = {qs.data(), 0, d.data(), start.data(), blocks};
  }
};
std::vector<uint8_t> spec_panel(int t, const Layout& l, int64_t cols, int64_t blocks,
                                const uint8_t* b, int64_t ldb) {
  std::vector<uint8_t> out(size_t(blocks * l.block_bytes), 0);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint8_t* o = &out[size_t(blk * l.block_bytes)];
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t* src = b + c * ldb + blk * kBlockBytes[t];
      o[2 * c] = src[0], o[2 * c + 1] = src[1];
      for (int i = 0; i < 32; ++i) {
        const int G = l.group, g = t == 0 ? i / G : (i % 16) / G;
        uint8_t& dst = o[2 * l.nr + g * G * l.nr + c * G + i % G];
        if (t == 0)
          dst = uint8_t(value(t, src, i) + l.offset);
        else
          dst |= uint8_t((value(t, src, i) + 8) << (4 * (i / 16)));
      }
    }
  }
  return out;
}

void test_pack(const KernelRow& row, int t) {
  const Layout l = layout_of(row, t);
  ASSERT_EQ(row.cols, l.nr);
  const auto fn = reinterpret_cast<arch::QGemmPackFn>(row.fn);
  int combo = 0;
  for (int64_t cols : {int64_t(1), int64_t(5), l.nr})
    for (int64_t blocks : {1, 3, 8}) {
      const int64_t ldb = blocks * kBlockBytes[t] + (combo % 2) * 5;
      const auto b = random_rows(t, cols, blocks, ldb, uint32_t(100 + combo++));
      std::vector<uint8_t> got(size_t(blocks * l.block_bytes + 64), 0xC3);
      fn(cols, blocks, b.data(), ldb, got.data());
      const auto want = spec_panel(t, l, cols, blocks, b.data(), ldb);
      for (size_t i = 0; i < want.size(); ++i) {
        // Missing columns: any bytes but a zero scale.
        const int64_t in_block = int64_t(i) % l.block_bytes, data = in_block - 2 * l.nr;
        if (data >= 0 && data % (l.group * l.nr) / l.group >= cols) continue;
        ASSERT_EQ(got[i], want[i])
            << row.name << " cols " << cols << " blocks " << blocks << " byte " << i;
      }
      for (size_t i = want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], 0xC3) << row.name;
    }
}

void test_gemm(const KernelRow& row, int t) {
  const auto fn = reinterpret_cast<arch::QGemmFn>(row.fn);
  const int R = row.rows;
  const Layout l = layout_of(row, t);
  // NR: one panel's columns, or two adjacent panels' for a wide tile (QuantKernels::gemm_wide),
  // which takes more columns than one panel holds.
  const int64_t NR = row.cols, first = NR == l.nr ? 0 : l.nr;
  ASSERT_TRUE(NR == l.nr || NR == 2 * l.nr) << row.name;
  std::mt19937 gen(uint32_t(R * 10 + t + NR));
  int combo = 0;
  for (int64_t blocks : {1, 2, 3, 5, 9})
    for (int64_t cols : {first + 1, first + 7, NR}) {
      const int64_t K = blocks * 32, lda = K + (combo % 3) * 32, ldc = NR + 3;
      const float alpha = combo % 2 ? 0.25f : -1.0f, beta = combo % 3 == 1 ? 0.5f : 0.0f;
      ++combo;
      std::vector<int8_t> qs(size_t(R * lda));
      for (auto& x : qs) x = int8_t(int(gen() % 255) - 127);
      // The last row's last block at the largest sums (|q| 127 against weights -128 or n 0):
      // 32 x 127 x 128, which a tile's float conversion must take exactly.
      const bool extreme = combo % 2 == 1;
      if (extreme) std::fill_n(&qs[size_t((R - 1) * lda + K - 32)], 32, int8_t(-127));
      std::vector<float> d(size_t(R * blocks));
      for (auto& x : d) x = ref::f16_to_f32(ref::f32_to_f16(float(int(gen() % 2000) - 1000) / 997));
      std::vector<int32_t> start(size_t(R * blocks));
      for (int r = 0; r < R; ++r)
        for (int64_t b = 0; b < blocks; ++b) {
          int32_t sum = 0;
          for (int i = 0; i < 32; ++i) sum += qs[size_t(r * lda + 32 * b + i)];
          start[size_t(r * blocks + b)] = l.bias - l.offset * sum;
        }
      const int64_t ldb = blocks * kBlockBytes[t] + 3;
      auto w = random_rows(t, cols, blocks, ldb, uint32_t(combo));
      if (extreme)  // column 0's last block: q8_0 values -128, q4_0 nibbles 0 (q = -8)
        std::fill_n(&w[size_t((blocks - 1) * kBlockBytes[t] + 2)], kBlockBytes[t] - 2,
                    uint8_t(0x80 * (t == 0)));
      auto panel = spec_panel(t, l, std::min(cols, l.nr), blocks, w.data(), ldb);
      if (cols > l.nr) {
        const auto second = spec_panel(t, l, cols - l.nr, blocks, &w[size_t(l.nr * ldb)], ldb);
        panel.insert(panel.end(), second.begin(), second.end());
      }
      std::vector<float> c(size_t((R + 1) * ldc), kGuard), c0;
      for (int r = 0; r < R; ++r)
        for (int64_t j = 0; j < cols; ++j)
          c[size_t(r * ldc + j)] = beta != 0.0f ? float(int(gen() % 100) - 50) / 7 : NAN;
      c0 = c;
      const TileRows a(l, R, blocks, qs, lda, d, start);
      fn(a.a, panel.data(), c.data(), ldc, cols, alpha, beta);
      int bad = 0;
      for (int r = 0; r <= R; ++r)
        for (int64_t j = 0; j < ldc; ++j) {
          const float got = c[size_t(r * ldc + j)];
          if (r == R || j >= cols) {
            if (got != kGuard && ++bad <= 3)
              ADD_FAILURE() << row.name << " wrote " << r << "," << j;
            continue;
          }
          double want = 0, mag = 0;
          for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* blk = &w[size_t(j * ldb + b * kBlockBytes[t])];
            uint16_t h;
            std::memcpy(&h, blk, 2);
            const double dk = ref::f16_to_f32(h), dq = d[size_t(r * blocks + b)];
            double isum = 0, iabs = 0;
            for (int i = 0; i < 32; ++i) {
              const double p = double(qs[size_t(r * lda + 32 * b + i)]) * value(t, blk, i);
              isum += p, iabs += std::fabs(p);
            }
            want += dq * dk * isum, mag += std::fabs(dq * dk) * iabs;
          }
          const double c_in = beta != 0.0f ? double(c0[size_t(r * ldc + j)]) : 0.0;
          want = alpha * want + beta * c_in;
          const double bound =
              double(16 + blocks) * 0x1p-24 * (std::fabs(alpha) * mag + std::fabs(beta * c_in)) +
              1e-30;
          if (!(std::fabs(got - want) <= bound) && ++bad <= 3)
            ADD_FAILURE() << row.name << " blocks " << blocks << " cols " << cols << " at " << r
                          << "," << j << ": " << got << " vs " << want;
        }
      if (bad) return;
    }
}

}  // namespace

}  // namespace quant_gemm_kernels_test

void testers::quant_gemm_kernel(const tessera::detail::KernelRow& row) {
  using namespace quant_gemm_kernels_test;
  switch (row.family) {
    case KernelFamily::quant_gemm_q8_0:
      return test_gemm(row, 0);
    case KernelFamily::quant_gemm_q4_0:
      return test_gemm(row, 1);
    case KernelFamily::quant_gemm_pack_q8_0:
      return test_pack(row, 0);
    case KernelFamily::quant_gemm_pack_q4_0:
      return test_pack(row, 1);
    default:
      FAIL() << row.name << " is not a kernel of the packed block-type GEMM";
  }
}
