// The avx512_vnni table's GEMV kernels for block-type weights as stored (QuantDotFn's contract,
// arch/kernels.hpp; QuantKernels::gemv), by intrinsics: xsimd 8.1 has no vpdpbusd.
//
// A Linear layer's weight rows are thousands of values long and lie one after another, so the
// kernel reads one key (weight row) at a time through all its blocks: a single sequential stream
// the hardware prefetcher follows, the query rows' blocks coming from L1. Sixteen blocks make a
// chunk whose sixteen int32 sums end in one vector (a tree of unpacks and adds over the chunk's
// product vectors), so the float work is one conversion, one product of the scales and one FMA per
// 16 blocks and row, where the per-pair kernel spent them per 2 blocks and built each pair's
// scales by lane moves; the keys' 16 scales come four to a word (quant_lanes.hpp, as the stream's
// prefetch), q4_0's by two word permutes. q8_0 puts two
// blocks in a vector (the key unsigned, k + 128); q4_0 four: each block's 16 bytes of nibbles in a
// 128-bit lane, the low nibbles against values 0-15 of its query block and the high against
// 16-31. The offset's share (-off sum q) is added to the chunk's sums (QuantRows::sums, or summed
// here). Blocks past the last whole chunk go two at a time as in the per-pair kernel, into their
// own accumulator. Each key's sum is a fixed tree of its blocks, wherever it falls in the call.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"
#include "quant_vnni512.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace vnni512 {

constexpr int kChunk = 16;  // blocks a chunk: their sums one vector

// Adds lanes within 128-bit lanes: lane L of the result = [sum_L a, sum_L b, sum_L c, sum_L d]
// (sum_L: the four int32 of 128-bit lane L).
inline __m512i lane_sums(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

// The chunk's 16 block sums in block order from its product vectors: q8_0 p[8], block 2i in
// lanes 0-7 of p[i], 2i + 1 in lanes 8-15; q4_0 p[4], block 4i + L in 128-bit lane L of p[i].
template <int T>
inline __m512i chunk_sums(const __m512i* p) {
  if constexpr (T == 0) {
    const __m512i y0 = lane_sums(p[0], p[1], p[2], p[3]), y1 = lane_sums(p[4], p[5], p[6], p[7]);
    // [blocks 0 2 4 6 | 1 3 5 7 | 8 10 12 14 | 9 11 13 15]
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0);
    return _mm512_permutexvar_epi32(order, s);
  } else {
    // lane 4 L + i = block 4 i + L
    const __m512i s = lane_sums(p[0], p[1], p[2], p[3]);
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_epi32(order, s);
  }
}

// The key's chunk as unsigned bytes: q8_0 8 vectors of two blocks (k + 128); q4_0 8 vectors,
// [i] the low nibbles of blocks 4i..4i+3 (one a 128-bit lane), [4 + i] the high.
template <int T>
inline void chunk_key(const uint8_t* blk, __m512i* kv) {
  constexpr int64_t BS = kQBlockBytes[T];
  if constexpr (T == 0) {
    for (int i = 0; i < 8; ++i) kv[i] = key_pair<0>(blk + 2 * i * BS, true);
  } else {
    const __m512i m = _mm512_set1_epi8(15);
    for (int i = 0; i < 4; ++i) {
      const uint8_t* b = blk + 4 * i * BS + 2;
      __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + BS)), 1);
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * BS)), 2);
      z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * BS)), 3);
      kv[i] = _mm512_and_si512(z, m);
      kv[4 + i] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m);
    }
  }
}

// The chunk's 16 scales (f16): q4_0's lie at words 9 i of its 288 bytes, eight in each 128-byte
// half, picked by two word permutes rather than sixteen scalar loads; q8_0's (544 bytes) four to
// a word (scale_word).
template <int T>
inline __m256i chunk_scales(const uint8_t* blk) {
  constexpr int64_t BS = kQBlockBytes[T];
  if constexpr (T == 1) {
    const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 63, 54, 45,
                                         36, 27, 18, 9, 0, 63, 54, 45, 36, 27, 18, 9, 0);
    const __m512i lo =
        _mm512_permutex2var_epi16(_mm512_loadu_si512(blk), idx, _mm512_loadu_si512(blk + 64));
    const __m512i hi = _mm512_permutex2var_epi16(_mm512_loadu_si512(blk + 8 * BS), idx,
                                                 _mm512_loadu_si512(blk + 8 * BS + 64));
    return _mm512_castsi512_si256(_mm512_mask_mov_epi16(lo, 0xFF00, hi));
  }
  return _mm256_set_epi64x(static_cast<long long>(scale_word<T>(blk + 12 * BS)),
                           static_cast<long long>(scale_word<T>(blk + 8 * BS)),
                           static_cast<long long>(scale_word<T>(blk + 4 * BS)),
                           static_cast<long long>(scale_word<T>(blk)));
}

// Row r's query bytes against the chunk's key vectors: the 16 block sums of q k + off sum q.
template <int T>
inline __m512i chunk_products(const int8_t* q, const __m512i* kv) {
  __m512i p[8];
  if constexpr (T == 0) {
    for (int i = 0; i < 8; ++i)
      p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), kv[i], _mm512_loadu_si512(q + 64 * i));
  } else {
    for (int i = 0; i < 4; ++i) {
      const __m512i a0 = _mm512_loadu_si512(q + 128 * i), a1 = _mm512_loadu_si512(q + 128 * i + 64);
      // values 0-15 of blocks 4i..4i+3, one a 128-bit lane, and 16-31
      const __m512i lo = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i hi = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
      p[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), kv[i], lo), kv[4 + i],
                                 hi);
    }
  }
  return chunk_sums<T>(p);
}

// -off sum q of the chunk's 16 blocks of row r (from QuantRows::sums, or summed here).
template <int T>
inline __m512i chunk_starts(const QuantRows& q, int r, int64_t b) {
  constexpr int kShift = T == 0 ? 7 : 3;  // off = 128 or 8
  __m512i sums;
  if (q.sums != nullptr) {
    sums = _mm512_loadu_si512(q.sums + r * q.blocks + b);
  } else {
    const int8_t* qs = q.qs + r * q.ld + b * kQBlock;
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i p[8];
    for (int i = 0; i < 8; ++i)
      p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(qs + 64 * i));
    sums = chunk_sums<0>(p);
  }
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, kShift));
}

}  // namespace vnni512

template <int T, int R>
void quant_gemv_vnni512(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                        int64_t lds, float alpha) {
  using namespace vnni512;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks, whole = blocks / kChunk * kChunk;
  const uint8_t* end = k + (n - 1) * ldk + blocks * BS;  // the call's last byte, + 1
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* key = k + j * ldk;
    __m512 acc[R], tail[R];
    for (int r = 0; r < R; ++r) acc[r] = tail[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < whole; b += kChunk) {
      const uint8_t* blk = key + b * BS;
      prefetch_gemv_ahead(blk, kChunk * BS, end);
      __m512i kv[8];
      chunk_key<T>(blk, kv);
      const __m512 dk = _mm512_cvtph_ps(chunk_scales<T>(blk));
      for (int r = 0; r < R; ++r) {
        const __m512i sums = _mm512_add_epi32(chunk_products<T>(q.qs + r * q.ld + b * kQBlock, kv),
                                              chunk_starts<T>(q, r, b));
        const __m512 sc = _mm512_mul_ps(_mm512_loadu_ps(q.d + r * blocks + b), dk);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), sc, acc[r]);
      }
    }
    for (int64_t b = whole; b < blocks; b += 2) {
      const bool two = b + 1 < blocks;
      const __m512i kv = key_pair<T>(key + b * BS, two);
      const __m512 dk = pair_scales<T>(key + b * BS, two);
      for (int r = 0; r < R; ++r) {
        const int8_t* qp = q.qs + r * q.ld + b * kQBlock;
        const __m512i qv =
            _mm512_maskz_loadu_epi8(two ? ~__mmask64(0) : __mmask64(0xFFFFFFFFu), qp);
        const __m512i qsum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), qv);
        const __m512i start =
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(qsum, T == 0 ? 7 : 3));
        const float* dp = q.d + r * blocks + b;
        const __m512 dq =
            _mm512_insertf32x8(_mm512_set1_ps(dp[0]), _mm256_set1_ps(two ? dp[1] : 0.0f), 1);
        const __m512i t = _mm512_dpbusd_epi32(start, kv, qv);
        tail[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dq, dk), tail[r]);
      }
    }
    for (int r = 0; r < R; ++r)
      s[r * lds + j] = alpha * (_mm512_reduce_add_ps(acc[r]) + _mm512_reduce_add_ps(tail[r]));
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
