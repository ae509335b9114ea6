// The integer GEMM tile of block-type weights on AVX512-VNNI (QGemmFn and QGemmPackFn,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no vpdpbusd.
//
// Contract:
//  - A panel holds 16 weight rows (C's columns, one per int32 lane) block by block: the 16
//    scales as f16 (32 bytes), then the block's 32 values as unsigned bytes, offset (q8_0:
//    q + 128; q4_0: the stored n = q + 8), in the order vpdpbusd takes them: q8_0 8 vectors of
//    64 bytes, vector g lane c holding values 4g..4g+3 of column c; q4_0 4 vectors whose low
//    nibbles are values 4g..4g+3 and high nibbles 4g+16..4g+19. Missing columns are zero
//    (scale 0). 544 or 288 bytes a block: the weights' own bytes, regrouped. ldb * 15 must fit
//    in int32 (the gather's offsets): weight rows under 143 MB apart.
//  - gemm[t][R]: per row and block an int32 lane sum started at start = -off sum q (so that it
//    is sum q k exactly: |q| <= 127, the offset values <= 255, 32 products within int32), then
//    converted and scaled by dq dk (one float rounding each) into a float32 accumulator, blocks
//    in order; alpha (and beta C) at the store. The same sum for a row whatever R.
//  - A's R rows interleaved by words (QuantKernels::gemm_a_words, QGemmRows): with a pointer per
//    row the 8-row tile spilled its row addresses and reloaded them from the stack every block.
//  - Stateless, no allocation; reads the panel's blocks and A's rows only.
//
// Per block and 16 columns a row costs 8 vpdpbusd (A's 4 bytes broadcast within the instruction's
// memory operand) and 3 float operations; the panel's loads (and q4_0's nibble split) are shared
// by the R rows.
//
// gemm_wide[t][R] (qgemm_vnni512_wide): the same sums over two adjacent panels of one packing, 6
// rows by 32 columns. Cores with two 512-bit vpdpbusd pipes load two
// vectors a cycle, so the 16-column tile, one load (A's word) per vpdpbusd plus the panel's, is
// load-bound; a word broadcast once for two vpdpbusd makes 6 rows 78 loads per 96 vpdpbusd. What
// is left shares vpdpbusd's pipes: per row, vector and block one vmulps (dq dk) and one vfmadd
// (the conversion, integer and load work issue elsewhere), so 80% of the vpdpbusd peak is the
// ceiling. 12 int32 and 12 float32 accumulators, two panel vectors (q4_0: four nibble vectors)
// and a broadcast within 32 zmm. A decode step's single row keeps the 16-column tile:
// it streamed 32-column panels from memory more slowly.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int kQGemmNr = 16;
inline constexpr int64_t kQGemmBlockBytes[2] = {32 + 512, 32 + 256};

// A panel's block g-th vector is the 4-byte word g of each column's data (q4_0's stored byte
// 4g + j holds values 4g + j and 4g + j + 16: the layout above as stored), so packing is a
// gather of words per vector, q8_0's offset one xor.
template <int T>
void qgemm_pack_vnni512(int64_t cols, int64_t blocks, const uint8_t* b, int64_t ldb,
                        uint8_t* panel) {
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int kWords = T == 0 ? 8 : 4;
  const __mmask16 m = cols >= kQGemmNr ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(int32_t(ldb)));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint8_t* out = panel + blk * kQGemmBlockBytes[T];
    const uint8_t* src = b + blk * BS;
    const __m512i d = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, rows, src, 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(d));
    for (int g = 0; g < kWords; ++g) {
      __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, rows, src + 2 + 4 * g, 1);
      if constexpr (T == 0) w = _mm512_xor_si512(w, _mm512_set1_epi8(-128));
      _mm512_storeu_si512(out + 32 + 64 * g, w);
    }
  }
}

namespace qgemm512 {

// acc + x . (the 4 bytes at p, broadcast), the broadcast embedded in vpdpbusd's memory operand.
inline __m512i dpbusd_bcast(__m512i acc, __m512i x, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0"
          : "+v"(acc)
          : "v"(x), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

}  // namespace qgemm512

// R rows; rows of one or two take two int32 chains per block (vpdpbusd's latency, not its
// throughput, would bound a single chain), summed exactly.
template <int T, int R>
void qgemm_vnni512(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc, int64_t cols,
                   float alpha, float beta) {
  constexpr int kChains = R <= 2 ? 2 : 1;
  const int64_t blocks = a.blocks;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i nib = _mm512_set1_epi8(15);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kQGemmBlockBytes[T];
    const __m512 dk = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i is[kChains][R];
    for (int r = 0; r < R; ++r) {
      is[0][r] = _mm512_set1_epi32(a.start[b * R + r]);
      if constexpr (kChains == 2) is[1][r] = _mm512_setzero_si512();
    }
    // Word g of row r at q + 4 (g R + r): one pointer for every row.
    const int8_t* q = a.qs + b * kQBlock * R;
    if constexpr (T == 0) {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i w = _mm512_loadu_si512(p + 32 + 64 * g);
        for (int r = 0; r < R; ++r)
          is[g % kChains][r] = qgemm512::dpbusd_bcast(is[g % kChains][r], w, q + 4 * (g * R + r));
      }
    } else {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i raw = _mm512_loadu_si512(p + 32 + 64 * g);
        // One load for both halves: GCC otherwise folds it into each use, doubling the L1 reads.
        __asm__("" : "+v"(raw));
        const __m512i lo = _mm512_and_si512(raw, nib);
        // With a chain of their own the high nibbles stay in place (16 n, so every term and the
        // chain's sum are multiples of 16: one exact shift a block); one chain shifts them down.
        const __m512i hi = kChains == 2 ? _mm512_andnot_si512(nib, raw)
                                        : _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
        for (int r = 0; r < R; ++r) {
          is[0][r] = qgemm512::dpbusd_bcast(is[0][r], lo, q + 4 * (g * R + r));
          is[kChains - 1][r] =
              qgemm512::dpbusd_bcast(is[kChains - 1][r], hi, q + 4 * ((g + 4) * R + r));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      __m512i sum = is[0][r];
      if constexpr (kChains == 2)
        sum = _mm512_add_epi32(sum, T == 0 ? is[1][r] : _mm512_srai_epi32(is[1][r], 4));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                               _mm512_mul_ps(dk, _mm512_set1_ps(a.d[b * R + r])), acc[r]);
    }
  }
  const __mmask16 m = cols >= kQGemmNr ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __m512 va = _mm512_set1_ps(alpha);
  for (int r = 0; r < R; ++r) {
    __m512 out = _mm512_mul_ps(va, acc[r]);
    if (beta != 0.0f)
      out = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, c + r * ldc), out);
    _mm512_mask_storeu_ps(c + r * ldc, m, out);
  }
}

namespace qgemm512 {

// Lanes of a 16-column half h holding columns < cols.
inline __mmask16 half_mask(int64_t cols, int h) {
  const int64_t n = cols - 16 * h;
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

}  // namespace qgemm512

// Two adjacent panels (a.blocks blocks each) at once, cols in (16, 32]: per A word broadcast two
// vpdpbusd. R rows; one row takes two int32 chains a vector (vpdpbusd's latency, not its
// throughput, would bound two), summed exactly.
template <int T, int R>
void qgemm_vnni512_wide(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc,
                        int64_t cols, float alpha, float beta) {
  constexpr int kChains = R == 1 ? 2 : 1;
  const int64_t blocks = a.blocks;
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const __m512i nib = _mm512_set1_epi8(15);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kQGemmBlockBytes[T];
    const uint8_t* p1 = p + blocks * kQGemmBlockBytes[T];
    __m512i is[kChains][R][2];
    for (int r = 0; r < R; ++r) {
      is[0][r][0] = is[0][r][1] = _mm512_set1_epi32(a.start[b * R + r]);
      if constexpr (kChains == 2) is[1][r][0] = is[1][r][1] = _mm512_setzero_si512();
    }
    // Word g of row r at q + 4 (g R + r): one pointer for every row.
    const int8_t* q = a.qs + b * kQBlock * R;
    const auto word = [&](int g, int r) {
      return _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(q + 4 * (g * R + r)));
    };
    if constexpr (T == 0) {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i w0 = _mm512_loadu_si512(p + 32 + 64 * g);
        const __m512i w1 = _mm512_loadu_si512(p1 + 32 + 64 * g);
        for (int r = 0; r < R; ++r) {
          const __m512i x = word(g, r);
          is[g % kChains][r][0] = _mm512_dpbusd_epi32(is[g % kChains][r][0], w0, x);
          is[g % kChains][r][1] = _mm512_dpbusd_epi32(is[g % kChains][r][1], w1, x);
        }
      }
    } else {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i raw0 = _mm512_loadu_si512(p + 32 + 64 * g);
        __m512i raw1 = _mm512_loadu_si512(p1 + 32 + 64 * g);
        // One load for both halves: GCC otherwise folds it into each use, doubling the L1 reads.
        __asm__("" : "+v"(raw0), "+v"(raw1));
        // With a chain of their own the high nibbles stay in place (16 n, so every term and the
        // chain's sum are multiples of 16: one exact shift a block); one chain shifts them down.
        const auto high = [&](__m512i raw) {
          return kChains == 2 ? _mm512_andnot_si512(nib, raw)
                              : _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
        };
        const __m512i lo0 = _mm512_and_si512(raw0, nib), lo1 = _mm512_and_si512(raw1, nib);
        const __m512i hi0 = high(raw0), hi1 = high(raw1);
        for (int r = 0; r < R; ++r) {
          const __m512i x = word(g, r);
          is[0][r][0] = _mm512_dpbusd_epi32(is[0][r][0], lo0, x);
          is[0][r][1] = _mm512_dpbusd_epi32(is[0][r][1], lo1, x);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i x = word(g + 4, r);
          is[kChains - 1][r][0] = _mm512_dpbusd_epi32(is[kChains - 1][r][0], hi0, x);
          is[kChains - 1][r][1] = _mm512_dpbusd_epi32(is[kChains - 1][r][1], hi1, x);
        }
      }
    }
    const __m512 dk[2] = {
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)))};
    for (int r = 0; r < R; ++r) {
      const __m512 da = _mm512_set1_ps(a.d[b * R + r]);
      for (int v = 0; v < 2; ++v) {
        __m512i sum = is[0][r][v];
        if constexpr (kChains == 2)
          sum = _mm512_add_epi32(sum, T == 0 ? is[1][r][v] : _mm512_srai_epi32(is[1][r][v], 4));
        acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dk[v], da), acc[r][v]);
      }
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  for (int v = 0; v < 2; ++v) {
    const __mmask16 m = qgemm512::half_mask(cols, v);
    for (int r = 0; r < R; ++r) {
      float* out = c + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.0f) x = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, out), x);
      _mm512_mask_storeu_ps(out, m, x);
    }
  }
}

// The vpdpbusd ceiling: 24 independent chains, 64 products (128 operations) each, in inline
// assembly (GCC 12 kept an array of 24 accumulators on the stack, a store and a load a step).
// Bytes of 1 against 1: the sums grow by 4 a step, far from overflow over any timed run.
inline constexpr int kInt8PeakChains = 24;
#define TESSERA_DPBUSD12(o)                                         \
  "vpdpbusd %[x], %[x], %[a" #o                                     \
  "0]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "1]\n\tvpdpbusd %[x], %[x], %[a" #o \
  "2]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "3]\n\tvpdpbusd %[x], %[x], %[a" #o \
  "4]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "5]\n\tvpdpbusd %[x], %[x], %[a" #o \
  "6]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "7]\n\tvpdpbusd %[x], %[x], %[a" #o \
  "8]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "9]\n\tvpdpbusd %[x], %[x], %[a" #o \
  "a]\n\t"                                                          \
  "vpdpbusd %[x], %[x], %[a" #o "b]\n\t"
inline float int8_dot_peak_loop(int64_t iters) {
  __m512i a[kInt8PeakChains];
  for (int i = 0; i < kInt8PeakChains; ++i) a[i] = _mm512_set1_epi32(i);
  __m512i a00 = a[0], a01 = a[1], a02 = a[2], a03 = a[3], a04 = a[4], a05 = a[5], a06 = a[6],
          a07 = a[7], a08 = a[8], a09 = a[9], a0a = a[10], a0b = a[11], a10 = a[12], a11 = a[13],
          a12 = a[14], a13 = a[15], a14 = a[16], a15 = a[17], a16 = a[18], a17 = a[19], a18 = a[20],
          a19 = a[21], a1a = a[22], a1b = a[23];
  const __m512i x = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < iters; ++i) {
    __asm__(TESSERA_DPBUSD12(0)
            : [a00] "+v"(a00), [a01] "+v"(a01), [a02] "+v"(a02), [a03] "+v"(a03), [a04] "+v"(a04),
              [a05] "+v"(a05), [a06] "+v"(a06), [a07] "+v"(a07), [a08] "+v"(a08), [a09] "+v"(a09),
              [a0a] "+v"(a0a), [a0b] "+v"(a0b)
            : [x] "v"(x));
    __asm__(TESSERA_DPBUSD12(1)
            : [a10] "+v"(a10), [a11] "+v"(a11), [a12] "+v"(a12), [a13] "+v"(a13), [a14] "+v"(a14),
              [a15] "+v"(a15), [a16] "+v"(a16), [a17] "+v"(a17), [a18] "+v"(a18), [a19] "+v"(a19),
              [a1a] "+v"(a1a), [a1b] "+v"(a1b)
            : [x] "v"(x));
  }
#undef TESSERA_DPBUSD12
  const __m512i all[] = {a00, a01, a02, a03, a04, a05, a06, a07, a08, a09, a0a, a0b,
                         a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a1a, a1b};
  __m512i sum = all[0];
  for (int i = 1; i < kInt8PeakChains; ++i) sum = _mm512_add_epi32(sum, all[i]);
  return float(_mm512_reduce_add_epi32(sum));
}
inline constexpr int kInt8PeakOpsPerIter = kInt8PeakChains * 128;

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
