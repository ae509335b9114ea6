// The block types q8_0 and q4_0 (ggml's layouts; tessera.h): quantize, dequantize, the query
// rows' rounding, the integer dot kernels of Q K^T and the dequantizing P V kernels, written once
// over an ISA's integer lanes (QOps: arch/x86/quant_x86.hpp, arch/arm/quant_neon.hpp; QOps::Pv
// the float lanes of P V).
//
// Contract:
//  - A q8_0 block is 34 bytes: an f16 scale d, then 32 int8 q (value i = d q[i]). A q4_0 block
//    is 18 bytes: an f16 d, then 16 bytes whose low nibbles are values 0-15 and high nibbles
//    values 16-31, each stored as n = q + 8 (value = d (n - 8)).
//  - quantize[t](n, x, y): n (a multiple of 32) floats to n / 32 blocks, bit for bit as
//    tessera::reference::quantize (ggml's rounding for finite values; a block with a NaN or an
//    infinity gets d = NaN, every q 0). dequantize[t]: exact.
//  - quantize_rows: the query rows as q8_0 blocks (the rounding of quantize), stored split: the
//    int8 in qs (row r at qs + r d), each block's scale as the float the f16 d widens to.
//  - dot[t][R](q, k, ldk, n, s, lds, alpha): R query rows against n keys (rows of q.blocks
//    blocks, ldk bytes apart): s[r lds + j] = alpha sum_b (dq dk) isum_b, isum_b the exact int32
//    dot of block b (the query's q in [-127, 127], as quantize_rows makes them; a key's any
//    int8), the products of the scales and the block sums in float32, the blocks summed in an
//    order the kernel fixes (the same for every key and row, wherever the key falls in the call).
//    q.streamed (K from memory) may change where a kernel prefetches to, never what it returns.
//  - pv[t][R](n, p, ldp, v, ldv, blocks, o, ldo, next): o[r ldo + c] += sum_j p[r ldp + j] d_v
//    q_v, float32, the keys summed in order into each O element (which it reads and writes).
//    They prefetch next's spread rows over their loop; the dot kernels where the table says so
//    (QuantKernels::dot_spreads).
//  - Kernels are stateless, allocate nothing, read no byte past the blocks they are given. They
//    may prefetch the rows after their call's, where NextRows says those lie (the next page's,
//    in a paged cache): a hint that never faults, not a read.
#pragma once

#include "kernel_ns.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../kernels.hpp"
#include "convert.hpp"
#include "prefetch.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace quant_detail {

inline float scale_of(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return convert_detail::f16_to_f32(h);
}

// std::round (half away from zero) without the library call, so that the loops vectorize: the
// truncation, then one away from zero when the fraction dropped is half or more (exact).
inline float round_away(float v) {
  const float t = std::trunc(v);
  return std::fabs(v - t) >= 0.5f ? t + std::copysign(1.0f, v) : t;
}

// One block of 32 floats to q8_0 (y: 34 bytes). Written for the vectorizer, with integer
// comparisons on the values' bits (a float comparison in a loop is not if-converted under
// -ftrapping-math, and the loop stayed scalar: the rounding of the query rows was a tenth of a
// q8_0-K prefill). |x| orders as its bits, and a NaN or infinity has the largest; each value is
// clamped to +-127 (a NaN to 0) before it is rounded half away from zero by truncation (exact
// below 2^31) and the fraction dropped, which is exact: the same bits as the reference.
inline void q8_0_block(const float* x, uint8_t* y) {
  constexpr uint32_t kAbs = 0x7fffffffu, kInf = 0x7f800000u, k127 = 0x42fe0000u,
                     kHalf = 0x3f000000u;
  uint32_t top = 0;
  for (int j = 0; j < kQBlock; ++j) {
    uint32_t b;
    std::memcpy(&b, x + j, 4);
    top = (b & kAbs) > top ? b & kAbs : top;
  }
  const bool finite = top < kInf;
  float amax;
  std::memcpy(&amax, &top, 4);
  const float d = finite ? amax / 127.0f : 0.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = finite ? convert_detail::f32_to_f16(d) : uint16_t(0x7E00);
  std::memcpy(y, &dh, 2);
  // (a NaN v only where d < 2^-126, whose f16 is 0: tessera.h)
  int8_t q[kQBlock];
  for (int j = 0; j < kQBlock; ++j) {
    const float v = x[j] * id;
    uint32_t b;
    std::memcpy(&b, &v, 4);
    const uint32_t big = 0u - uint32_t((b & kAbs) > k127), nan = 0u - uint32_t((b & kAbs) > kInf);
    const uint32_t cb = ((b & ~big) | (((b & ~kAbs) | k127) & big)) & ~nan;
    float c;
    std::memcpy(&c, &cb, 4);
    const int32_t t = int32_t(c);
    const float f = c - float(t);
    uint32_t fb;
    std::memcpy(&fb, &f, 4);
    const int32_t half = int32_t((fb & kAbs) >= kHalf);
    q[j] = int8_t(t + half * (1 - 2 * int32_t(cb >> 31)));  // away from zero
  }
  if (!finite) std::memset(q, 0, sizeof q);  // (tessera.h: every q 0)
  std::memcpy(y + 2, q, sizeof q);
}

inline void q4_0_block(const float* x, uint8_t* y) {
  float amax = 0.0f, max = 0.0f;
  bool finite = true;
  for (int j = 0; j < kQBlock; ++j) {
    finite = finite && std::isfinite(x[j]);
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = finite ? convert_detail::f32_to_f16(d) : uint16_t(0x7E00);
  std::memcpy(y, &dh, 2);
  const auto nibble = [&](float v) {
    volatile float p = v * id;  // rounded before the add (the reference's), never an FMA
    const float n = std::trunc(p + 8.5f);
    return finite && n == n ? uint8_t(n < 0.0f ? 0.0f : n > 15.0f ? 15.0f : n) : uint8_t(8);
  };
  for (int j = 0; j < kQBlock / 2; ++j)
    y[2 + j] = uint8_t(nibble(x[j]) | nibble(x[j + kQBlock / 2]) << 4);
}

}  // namespace quant_detail

template <int T>
void quantize_blocks(int64_t n, const float* x, uint8_t* y) {
  for (int64_t b = 0; b < n / kQBlock; ++b)
    (T == 0 ? quant_detail::q8_0_block : quant_detail::q4_0_block)(x + b * kQBlock,
                                                                   y + b * kQBlockBytes[T]);
}

inline void quantize_q8_rows(int64_t rows, int64_t d, const float* x, int64_t ldx, int8_t* qs,
                             float* scales) {
  uint8_t block[34];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < d / kQBlock; ++b) {
      quant_detail::q8_0_block(x + r * ldx + b * kQBlock, block);
      scales[r * (d / kQBlock) + b] = quant_detail::scale_of(block);
      std::memcpy(qs + r * d + b * kQBlock, block + 2, kQBlock);
    }
}

// Dequantizes n values: the ISA's lanes turn 32 q into floats (QOps::dequant_block).
template <class QOps, int T>
void dequantize_blocks(int64_t n, const uint8_t* x, float* y) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const uint8_t* blk = x + b * kQBlockBytes[T];
    QOps::template dequant_block<T>(blk + 2, QOps::scale(blk), y + b * kQBlock);
  }
}

// The integer dot kernel: per key, per block, the key's 32 q widened once as |k| and each row's
// q signed by k (QOps::prep / dot: the sign trick, exact for |k| <= 128), the block's int32 lanes
// to float times dq dk into the row's accumulator; a horizontal sum per key and row. Two keys a
// step, for independent accumulator chains.
template <class QOps, int T, int R>
void quant_dot(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s, int64_t lds,
               float alpha) {
  using F = typename QOps::F;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks;
  // The caller's later rows: a share each step of keys.
  const auto spread = [&](int64_t j) {
    if (q.next.spread_rows > 0)
      prefetch_share(q.next.spread, q.next.spread_rows, ldk, blocks * BS, j / 2, (n + 1) / 2,
                     q.next.spread_l1);
  };
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    spread(j);
    F acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = QOps::zero(), acc1[r] = QOps::zero();
    const uint8_t* k0 = k + j * ldk;
    const uint8_t* k1 = k0 + ldk;
    for (int64_t b = 0; b < blocks; ++b) {
      const auto v0 = QOps::template load_k<T>(k0 + b * BS + 2);
      const auto v1 = QOps::template load_k<T>(k1 + b * BS + 2);
      const auto a0 = QOps::abs(v0), a1 = QOps::abs(v1);
      const float d0 = QOps::scale(k0 + b * BS), d1 = QOps::scale(k1 + b * BS);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const auto qv = QOps::load_q(q.qs + r * q.ld + b * kQBlock);
        const float dq = q.d[r * blocks + b];
        acc0[r] =
            QOps::fmadd(QOps::cvt(QOps::dot(a0, QOps::sign(qv, v0))), QOps::set1(dq * d0), acc0[r]);
        acc1[r] =
            QOps::fmadd(QOps::cvt(QOps::dot(a1, QOps::sign(qv, v1))), QOps::set1(dq * d1), acc1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      s[r * lds + j] = alpha * QOps::hsum(acc0[r]);
      s[r * lds + j + 1] = alpha * QOps::hsum(acc1[r]);
    }
  }
  for (; j < n; ++j) {
    spread(j);
    F acc[R];
    for (int r = 0; r < R; ++r) acc[r] = QOps::zero();
    const uint8_t* kj = k + j * ldk;
    for (int64_t b = 0; b < blocks; ++b) {
      const auto v = QOps::template load_k<T>(kj + b * BS + 2);
      const auto a = QOps::abs(v);
      const float dk = QOps::scale(kj + b * BS);
      for (int r = 0; r < R; ++r) {
        const auto qv = QOps::load_q(q.qs + r * q.ld + b * kQBlock);
        acc[r] = QOps::fmadd(QOps::cvt(QOps::dot(a, QOps::sign(qv, v))),
                             QOps::set1(q.d[r * blocks + b] * dk), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) s[r * lds + j] = alpha * QOps::hsum(acc[r]);
  }
}

// P V with V dequantized in registers. The keys go in groups of kPvKeys: first each key's block
// scales (one conversion a key and block), then each row's p times them, a vector loop over the
// keys (pd[b][r][j], so that the inner loop broadcasts a product from memory), then per block and
// chunk of Pv::kPvCols columns the rows' O chunk held in registers across the group's keys, each
// key's chunk of q widened to floats once for all rows.
constexpr int kPvKeys = 32;
// Copies of pd the inner loop reads, one per vector of a chunk where the FMA takes its broadcast
// from memory (AVX-512's {1to16}): GCC folds a broadcast into an FMA only when no other FMA reads
// the same address, else it broadcasts into a register first, a shuffle for every two FMAs.
template <class P, class = void>
struct PdCopies {
  static constexpr int value = 1;
};
template <class P>
struct PdCopies<P, std::void_t<decltype(P::kPdCopies)>> {
  static constexpr int value = P::kPdCopies;
};
constexpr int kPvMaxBlocks = 8;  // 256 values a row per pass
// pd[c][b][r][j] = p[r ldp + j] dv[b][j] for c < copies, b < nb, r < rows, j < nj (pd's extents
// copies x kPvMaxBlocks x rows x kPvKeys): out of line, once per table rather than per type and
// row count: the vectorized loop and its remainder are code a board pays for per kernel.
template <int Copies>
[[gnu::noinline]] void pv_scale_products(int64_t nb, int rows, int64_t nj,
                                         const float* __restrict p, int64_t ldp,
                                         const float (*__restrict dv)[kPvKeys],
                                         float* __restrict pd) {
  constexpr int64_t copy = int64_t(kPvMaxBlocks) * kMaxDotRows * kPvKeys;
  for (int64_t b = 0; b < nb; ++b)
    for (int r = 0; r < rows; ++r) {
      float* __restrict out = pd + (b * kMaxDotRows + r) * kPvKeys;
      const float* __restrict pr = p + r * ldp;
      for (int64_t j = 0; j < nj; ++j) {
        const float x = pr[j] * dv[b][j];
        for (int c = 0; c < Copies; ++c) out[c * copy + j] = x;
      }
    }
}
template <class QOps, int T, int R>
void quant_pv(int64_t n, const float* p, int64_t ldp, const uint8_t* v, int64_t ldv, int64_t blocks,
              float* o, int64_t ldo, NextRows next) {
  using P = typename QOps::Pv;  // the lanes of the float side (wider than a block's on AVX-512)
  using F = typename P::F;
  constexpr int L = P::kLanes, C = P::kPvCols / L, Copies = PdCopies<P>::value;
  static_assert(Copies == 1 || Copies == C, "one copy, or one a vector of the chunk");
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int kMaxBlocks = kPvMaxBlocks;
  float dv[kMaxBlocks][kPvKeys];
  float pd[Copies][kMaxBlocks][kMaxDotRows][kPvKeys];
  const int64_t groups = (n + kPvKeys - 1) / kPvKeys;
  for (int64_t b0 = 0; b0 < blocks; b0 += kMaxBlocks) {
    const int64_t nb = std::min<int64_t>(kMaxBlocks, blocks - b0);
    for (int64_t j0 = 0; j0 < n; j0 += kPvKeys) {
      const int64_t nj = std::min<int64_t>(kPvKeys, n - j0);
      // The next group's rows into L2 (past the last group: `next`, the next tile's or page's
      // rows in decode), so they arrive while this group's FMAs run; into L1 they would evict the
      // group being read.
      prefetch_call_rows<2>(v + b0 * BS, j0 + kPvKeys, kPvKeys, n,
                            next.rows > 0 ? next.at + b0 * BS : nullptr, next.rows, ldv, nb * BS);
      for (int64_t j = 0; j < nj; ++j)
        for (int64_t b = 0; b < nb; ++b) dv[b][j] = QOps::scale(v + (j0 + j) * ldv + (b0 + b) * BS);
      pv_scale_products<Copies>(nb, R, nj, p + j0, ldp, dv, &pd[0][0][0][0]);
      for (int64_t b = 0; b < nb; ++b) {
        if (next.spread_rows > 0)  // the caller's later rows: a share each block of a group
          prefetch_share(next.spread, next.spread_rows, ldv, blocks * BS,
                         j0 / kPvKeys * blocks + b0 + b, groups * blocks, next.spread_l1);
        for (int c0 = 0; c0 < kQBlock; c0 += P::kPvCols) {
          float* ob = o + (b0 + b) * kQBlock + c0;
          F acc[R][C];
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = P::load_f(ob + r * ldo + c * L);
          for (int64_t j = 0; j < nj; ++j) {
            F x[C];
            P::template load_v<T, C>(v + (j0 + j) * ldv + (b0 + b) * BS + 2, c0, x);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
              for (int c = 0; c < C; ++c)
                acc[r][c] = P::fmadd(x[c], P::set1(pd[c % Copies][b][r][j]), acc[r][c]);
          }
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) P::store_f(ob + r * ldo + c * L, acc[r][c]);
        }
      }
    }
  }
}

template <class QOps, int T, int... R>
void fill_quant_row(QuantKernels& k, std::integer_sequence<int, R...>) {
  ((k.dot[T][R + 1] = &quant_dot<QOps, T, R + 1>), ...);
  ((k.pv[T][R + 1] = &quant_pv<QOps, T, R + 1>), ...);
}

// TESSERA_NO_QUANTIZED (the CMake option TESSERA_QUANTIZED=OFF): no kernels, all null, and
// none of the templates above instantiated.
#if defined(TESSERA_NO_QUANTIZED)
template <class QOps>
QuantKernels make_quant_kernels() {
  return QuantKernels{};
}
#else
template <class QOps>
QuantKernels make_quant_kernels() {
  QuantKernels k{};
  k.quantize[0] = &quantize_blocks<0>;
  k.quantize[1] = &quantize_blocks<1>;
  k.dequantize[0] = &dequantize_blocks<QOps, 0>;
  k.dequantize[1] = &dequantize_blocks<QOps, 1>;
  k.quantize_rows = &quantize_q8_rows;
  k.dot_rows = kMaxDotRows;
  fill_quant_row<QOps, 0>(k, std::make_integer_sequence<int, kMaxDotRows>());
  fill_quant_row<QOps, 1>(k, std::make_integer_sequence<int, kMaxDotRows>());
  k.dot_name = QOps::kDotName;
  return k;
}
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
