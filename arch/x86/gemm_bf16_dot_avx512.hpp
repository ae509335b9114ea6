// bf16 x bf16 -> float32 micro-kernels on AVX512_BF16's VDPBF16PS, which multiplies 16 pairs of
// bf16 by 16 pairs and adds both products to 16 float32 sums: twice the products of a float32
// FMA per instruction. Intrinsics: xsimd 8.1 has no bf16 dot product.
//
// Contract, for bf16_dot_packed<MR, R> (after BLIS's KernelsHowTo):
//  - A and B are panels of k pairs (pack_bf16_pairs): pair step p of the A panel holds, for each
//    of its MR rows i, A(i, 2p) and A(i, 2p + 1) side by side (one 32-bit word); of the B panel,
//    for each of its NR = 32 columns j, B(2p, j) and B(2p + 1, j). An odd k's last pair ends in
//    a zero, as do the rows and columns past the matrix's edge.
//  - computes the R x NR tile acc(i, j) = sum over the pairs, in order, of A(i, 2p + 1)
//    B(2p + 1, j) + A(i, 2p) B(2p, j), one VDPBF16PS per pair: each product is exact in float32
//    and is added with rounding to nearest even; a bf16 subnormal input and a subnormal sum
//    count as zero (the instruction's DAZ and FTZ). Then C = alpha acc + beta C for the top-left
//    R x nr corner (nr <= NR); beta == 0 never reads C.
//  - pairs may be 0 (C = beta C); stateless, no allocation, reads and writes nothing else.
//
// Register tile (R = 14): 28 accumulators (C rows 0..13 x columns 0..31), the B pair step in 2
// registers, A's pair word broadcast as a {1to16} memory operand: 28 VDPBF16PS against 2 loads
// and 14 broadcasts per pair step, the float32 14 x 32 tile's balance (gemm_ukernel.hpp).
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../common/gemm_dot.hpp"
#include "../common/gemm_ukernel.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__AVX512BF16__) && defined(__AVX512BW__)

inline constexpr int kBf16DotNR = 32;

template <int MR, int R>
void bf16_dot_packed(int64_t pairs, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc,
                     int64_t nr, float alpha, float beta) {
  __m512 acc[R][2];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  prefetch_c<R, 2, 16, CacheLevel::l2>(c, ldc);
  for (int64_t p = 0; p < pairs; ++p) {
    if (p == pairs - kCTailSteps / 2) prefetch_c<R, 2, 16, CacheLevel::l1>(c, ldc);
    const auto b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b));
    const auto b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 32));
    TESSERA_UNROLL for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, a + 2 * i, sizeof word);
      const auto ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(word));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += 2 * MR;
    b += 2 * kBf16DotNR;
  }
  // C's columns by AVX-512 masks: store_tile's stack buffer for a partial tile made GCC spill
  // all 28 accumulators to the stack at the end of every call.
  const auto m0 = __mmask16(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const auto m1 = __mmask16(nr >= 32 ? 0xffff : nr > 16 ? (1u << (nr - 16)) - 1 : 0);
  if (alpha == 1.0f && beta == 0.0f) {
    TESSERA_UNROLL for (int i = 0; i < R; ++i) {
      _mm512_mask_storeu_ps(c + i * ldc, m0, acc[i][0]);
      _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc[i][1]);
    }
    return;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  TESSERA_UNROLL for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(acc[i][0], va), r1 = _mm512_mul_ps(acc[i][1], va);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

// r[0..15] (rows of 16 32-bit words) transposed in place: r[c] becomes column c.
TESSERA_ALWAYS_INLINE void transpose_16x16_epi32(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit lane q: rows 4i..4i+3 of column 4q + j.
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // Column 4q + j: lane q of r[j], r[4 + j], r[8 + j], r[12 + j].
  for (int j = 0; j < 4; ++j) {
    const __m512i a = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44);
    const __m512i b = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xee);
    const __m512i c = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
    const __m512i d = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xee);
    t[j] = _mm512_shuffle_i32x4(a, c, 0x88);
    t[4 + j] = _mm512_shuffle_i32x4(a, c, 0xdd);
    t[8 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(b, d, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// bf16_dot_nt<R, J> (few rows of bf16 A against bf16 B^T read in place: a bf16 token through
// weights stored as rows, or a bf16 query against a bf16 K): C(i, j) = alpha sum_p A(i, p)
// B(j, p) + beta C(i, j) for R rows (rows lda apart) and J columns (B rows ldb apart), both
// contiguous along p, as gemm_dot.hpp's dot kernels: each lane of a VDPBF16PS accumulator sums
// one pair of every 32 k steps, in order (a k past the last 32 read under a mask, as zeros),
// and the 16 lanes are reduced at the end (lanes::transpose_sum). k >= 0; beta == 0 never reads
// C. R x J <= 16 accumulators, R + 1 operands. No software prefetch: a call's J rows of B are
// one contiguous run when they are a matrix's consecutive rows, which the hardware prefetcher
// follows (1 x 4096 x 128, 1 thread: 92-100 GFLOP/s with the float32 dot kernel's prefetch of
// the rows 4 calls ahead, 110 without).
template <int R, int J>
void bf16_dot_nt(int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb,
                 float* c, int64_t ldc, float alpha, float beta) {
  using Arch = xsimd::avx512f;
  using B = xsimd::batch<float, Arch>;
  __m512 acc[R][J];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int j = 0; j < J; ++j) acc[i][j] =
      _mm512_setzero_ps();
  const auto step = [&](int64_t p, __mmask32 m) __attribute__((always_inline)) {
    __m512bh av[R];
    TESSERA_UNROLL for (int i = 0; i < R; ++i) av[i] =
        reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, a + i * lda + p));
    TESSERA_UNROLL for (int j = 0; j < J; ++j) {
      const auto bv = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, b + j * ldb + p));
      TESSERA_UNROLL for (int i = 0; i < R; ++i) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av[i], bv);
    }
  };
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) step(p, ~__mmask32(0));
  if (p < k) step(p, (__mmask32(1) << (k - p)) - 1);
  B sums[R][J];
  TESSERA_UNROLL for (int i = 0; i < R; ++i) TESSERA_UNROLL for (int j = 0; j < J; ++j) sums[i][j] =
      B(acc[i][j]);
  dot_tile_store<Arch, R, J>(
      sums, [](int, int, float t) { return t; }, c, ldc, alpha, beta);
}

// One panel of k pairs (the contract above) of `width` lanes (MR rows of A, or NR columns of B),
// `lanes` of them from the matrix and the rest zero. Element (lane l, k index p) of the source is
// src[p ld + l] when k_rows (A^T stored, or B stored k x n), else src[l ld + p] (A stored m x k,
// or B^T). width <= 32.
inline void pack_bf16_pairs(bool k_rows, int64_t lanes, int64_t k, const uint16_t* src, int64_t ld,
                            int64_t width, uint16_t* out) {
  const int64_t step = 2 * width;
  if (!k_rows) {
    // A pair is one 32-bit word of a source row: 16 lanes x 16 pairs at a time, a 32-bit
    // transpose in registers.
    const int64_t pairs = (k + 1) / 2;
    for (int64_t l0 = 0; l0 < width; l0 += 16) {
      const int64_t here = std::min<int64_t>(16, lanes - l0);  // lanes from the source
      const auto words = __mmask16((1u << std::min<int64_t>(16, width - l0)) - 1);
      for (int64_t c0 = 0; c0 < pairs; c0 += 16) {
        const int64_t h = std::min<int64_t>(32, k - 2 * c0);
        const __mmask32 in = h >= 32 ? ~__mmask32(0) : (__mmask32(1) << h) - 1;
        __m512i r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < here ? _mm512_maskz_loadu_epi16(in, src + (l0 + i) * ld + 2 * c0)
                          : _mm512_setzero_si512();
        transpose_16x16_epi32(r);
        const int64_t n = std::min<int64_t>(16, pairs - c0);
        for (int64_t j = 0; j < n; ++j)
          _mm512_mask_storeu_epi32(out + (c0 + j) * step + 2 * l0, words, r[j]);
      }
    }
    return;
  }
  // Two source rows interleaved lane by lane: pairs of lanes 0..15 from one permute, 16..31
  // from the other.
  alignas(64) static constexpr uint16_t kLo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                   37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                   11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i lo_idx = _mm512_load_si512(kLo);
  const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
  const __mmask32 in = lanes >= 32 ? ~__mmask32(0) : (__mmask32(1) << lanes) - 1;
  const __mmask32 out_lo = width >= 16 ? ~__mmask32(0) : (__mmask32(1) << (2 * width)) - 1;
  const __mmask32 out_hi = width >= 32   ? ~__mmask32(0)
                           : width <= 16 ? __mmask32(0)
                                         : (__mmask32(1) << (2 * width - 32)) - 1;
  for (int64_t p = 0; p < k; p += 2, out += step) {
    const __m512i r0 = _mm512_maskz_loadu_epi16(in, src + p * ld);
    const __m512i r1 =
        p + 1 < k ? _mm512_maskz_loadu_epi16(in, src + (p + 1) * ld) : _mm512_setzero_si512();
    _mm512_mask_storeu_epi16(out, out_lo, _mm512_permutex2var_epi16(r0, lo_idx, r1));
    if (out_hi)
      _mm512_mask_storeu_epi16(out + 32, out_hi, _mm512_permutex2var_epi16(r0, hi_idx, r1));
  }
}

// The bf16 dot-product ceiling: kBf16PeakChains chains of VDPBF16PS, 64 flops each (16 lanes,
// 2 products and 2 additions). The sums grow by 2e-6 per step: no overflow, no subnormals. 24
// chains, twice the FMA loop's 12: the instruction's latency is longer than the FMA's.
inline constexpr int kBf16PeakChains = 24;
inline float bf16_dot_peak_loop(int64_t iters) {
  constexpr int N = kBf16PeakChains;
  __m512 acc[N];
  for (int a = 0; a < N; ++a) acc[a] = _mm512_set1_ps(1.0f + 0.01f * float(a));
  const auto x = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3a83));  // bf16 0.001
  for (int64_t i = 0; i < iters; ++i) {
    TESSERA_UNROLL for (int a = 0; a < N; ++a) acc[a] = _mm512_dpbf16_ps(acc[a], x, x);
  }
  __m512 sum = acc[0];
  for (int a = 1; a < N; ++a) sum = _mm512_add_ps(sum, acc[a]);
  return _mm512_reduce_add_ps(sum);
}
inline constexpr int kBf16DotPeakFlopsPerIter = kBf16PeakChains * 64;

#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
