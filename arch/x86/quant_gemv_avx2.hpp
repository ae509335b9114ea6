// The avx2 table's GEMV kernels for block-type weights as stored (QuantDotFn's contract,
// arch/kernels.hpp; QuantKernels::gemv), by intrinsics: xsimd 8.1 has no vpmaddubsw.
//
// As the avx512_vnni ones (quant_gemv_vnni512.hpp): one key (weight row) at a time through all
// its blocks, a single sequential stream, the query rows' blocks from L1; a chunk of 8 blocks
// ends in one vector of 8 int32 sums, so the float work is one conversion, one scale product
// and one FMA per 8 blocks and row. A block is one vector: q8_0 as |k| . sign(q, k) by vpmaddubsw
// (|k| <= 128 unsigned, |q| <= 127: a pair of products within int16), q4_0 its nibbles n = k + 8
// unsigned against q (values 0-15 in the low half, 16-31 in the high), -8 sum q added to the
// chunk's sums (QuantRows::sums, or summed here); vpmaddwd by ones makes the pairs int32. Blocks
// past the last whole chunk go one at a time into their own accumulator. Each key's sum is a
// fixed tree of its blocks, wherever it falls in the call.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../common/quant_lanes.hpp"
#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace avx2_gemv {

constexpr int kChunk = 8;  // blocks a chunk: their sums one vector

// The 8 int32 sums of 8 block vectors (8 int32 each), in block order: two unpack levels add
// within 128-bit lanes, then the halves.
inline __m256i chunk_sums(const __m256i* p) {
  __m256i y[2];
  for (int h = 0; h < 2; ++h) {
    const __m256i* v = p + 4 * h;
    const __m256i ab =
        _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i cd =
        _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    // 128-bit lane L: the sums of lane L of blocks 4h..4h+3
    y[h] = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
  }
  return _mm256_add_epi32(_mm256_permute2x128_si256(y[0], y[1], 0x20),
                          _mm256_permute2x128_si256(y[0], y[1], 0x31));
}

// Block b of a key: q8_0 its k; q4_0 its nibbles n (values 0-15, then 16-31), unsigned.
template <int T>
inline __m256i key_block(const uint8_t* blk) {
  if constexpr (T == 0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    return _mm256_and_si256(
        _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1),
        _mm256_set1_epi8(15));
  }
}

// One block's 8 int32 partial sums of q k (q4_0: of q n).
template <int T>
inline __m256i block_products(__m256i k, const int8_t* qp) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qp));
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (T == 0)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(k, k), _mm256_sign_epi8(q, k)),
                             ones);
  else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(k, q), ones);
}

// q4_0's -8 sum q of the chunk's 8 blocks of a row (from QuantRows::sums, or summed here).
inline __m256i chunk_starts(const QuantRows& q, int r, int64_t b) {
  __m256i sums;
  if (q.sums != nullptr) {
    sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.sums + r * q.blocks + b));
  } else {
    __m256i p[kChunk];
    const __m256i ones = _mm256_set1_epi8(1);
    for (int i = 0; i < kChunk; ++i) p[i] = block_products<1>(ones, q.qs + r * q.ld + (b + i) * 32);
    sums = chunk_sums(p);
  }
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 3));
}

// The chunk's 8 scales, four to a word (scale_word).
template <int T>
inline __m256 chunk_scales(const uint8_t* blk) {
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<long long>(scale_word<T>(blk + 4 * kQBlockBytes[T])),
                     static_cast<long long>(scale_word<T>(blk))));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

}  // namespace avx2_gemv

template <int T, int R>
void quant_gemv_avx2(const QuantRows& q, const uint8_t* k, int64_t ldk, int64_t n, float* s,
                     int64_t lds, float alpha) {
  using namespace avx2_gemv;
  constexpr int64_t BS = kQBlockBytes[T];
  const int64_t blocks = q.blocks, whole = blocks / kChunk * kChunk;
  const uint8_t* end = k + (n - 1) * ldk + blocks * BS;  // the call's last byte, + 1
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* key = k + j * ldk;
    __m256 acc[R], tail[R];
    for (int r = 0; r < R; ++r) acc[r] = tail[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < whole; b += kChunk) {
      const uint8_t* blk = key + b * BS;
      prefetch_gemv_ahead(blk, kChunk * BS, end);
      __m256i kv[kChunk];
      for (int i = 0; i < kChunk; ++i) kv[i] = key_block<T>(blk + i * BS);
      const __m256 dk = chunk_scales<T>(blk);
      for (int r = 0; r < R; ++r) {
        __m256i p[kChunk];
        for (int i = 0; i < kChunk; ++i)
          p[i] = block_products<T>(kv[i], q.qs + r * q.ld + (b + i) * kQBlock);
        __m256i sums = chunk_sums(p);
        if constexpr (T == 1) sums = _mm256_add_epi32(sums, chunk_starts(q, r, b));
        const __m256 sc = _mm256_mul_ps(_mm256_loadu_ps(q.d + r * blocks + b), dk);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), sc, acc[r]);
      }
    }
    for (int64_t b = whole; b < blocks; ++b) {
      const uint8_t* blk = key + b * BS;
      const __m256i kv = key_block<T>(blk);
      const float dk = _cvtsh_ss(scale_bits(blk));
      for (int r = 0; r < R; ++r) {
        const int8_t* qp = q.qs + r * q.ld + b * kQBlock;
        __m256i p = block_products<T>(kv, qp);
        if constexpr (T == 1)  // -8 sum q, spread over the lanes' sum
          p = _mm256_sub_epi32(p, _mm256_slli_epi32(block_products<1>(_mm256_set1_epi8(1), qp), 3));
        tail[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(q.d[r * blocks + b] * dk),
                                  tail[r]);
      }
    }
    for (int r = 0; r < R; ++r) s[r * lds + j] = alpha * (hsum(acc[r]) + hsum(tail[r]));
  }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
