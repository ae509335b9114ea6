// The integer GEMM tile of block-type weights on AVX2 (QGemmFn and QGemmPackFn,
// arch/kernels.hpp), by intrinsics: xsimd 8.1 has no vpmaddubsw.
//
// Contract:
//  - A panel holds 8 weight rows (C's columns, one per int32 lane) block by block: the 8 scales
//    as f16 (16 bytes), then the block's values as stored: q8_0 8 vectors of 32 bytes, vector g
//    lane c holding values 4g..4g+3 of column c (signed, no offset); q4_0 4 vectors whose low
//    nibbles are values 4g..4g+3 and high nibbles 4g+16..4g+19 (n = q + 8, offset 8), that is
//    column c's stored bytes 4g..4g+3. Missing columns are zero (scale 0). 272 or 144 bytes a
//    block (the sdot tile's panels). ldb * 7 must fit in int32 (the gather's offsets).
//  - gemm[t][R], R <= 4: per row and block an int32 lane sum started at start = -off sum q (off
//    0 for q8_0, 8 for q4_0), then converted and scaled by dq dk (one float rounding each) into a
//    float32 accumulator, blocks in order; alpha (and beta C) at the store. The same sum for a
//    row whatever R. Rows of A hold q in [-127, 127] (quantize_rows').
//  - Exact without saturation: vpmaddubsw adds two u8 x s8 products into int16. q8_0 takes
//    |w| times sign(a, w): 2 x 128 x 127 = 32512 a pair; q4_0 adds its 8 half-groups' pairs in
//    int16 before widening: 8 x 2 x 15 x 127 = 30480. Both under 32767.
//  - Stateless, no allocation; reads the panel's blocks and A's rows only.
//
// Per block and 8 columns a row costs, for q8_0, 8 x (vpsignb, vpmaddubsw, vpmaddwd, vpaddd);
// for q4_0 8 vpmaddubsw, 7 vpaddw and one vpmaddwd; then 3 float operations. The panel's loads,
// |w| and q4_0's nibble split are shared by the R rows.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "../kernels.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

inline constexpr int kQGemmAvx2Nr = 8, kQGemmAvx2Mr = 4;
inline constexpr int64_t kQGemmAvx2BlockBytes[2] = {16 + 256, 16 + 128};

namespace qgemm_avx2_detail {

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Lanes below cols: the gather's and the store's mask.
inline __m256i lanes_below(int64_t cols) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(cols < 8 ? cols : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace qgemm_avx2_detail

// Vector g of a block is the 4-byte word g of each column's values: a gather of words.
template <int T>
void qgemm_pack_avx2(int64_t cols, int64_t blocks, const uint8_t* b, int64_t ldb, uint8_t* panel) {
  constexpr int64_t BS = kQBlockBytes[T];
  constexpr int kWords = T == 0 ? 8 : 4;
  const __m256i m = qgemm_avx2_detail::lanes_below(cols);
  const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(int32_t(ldb)));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint8_t* out = panel + blk * kQGemmAvx2BlockBytes[T];
    const uint8_t* src = b + blk * BS;
    std::memset(out, 0, 16);
    for (int64_t c = 0; c < cols && c < kQGemmAvx2Nr; ++c)
      std::memcpy(out + 2 * c, src + c * ldb, 2);
    for (int g = 0; g < kWords; ++g) {
      const __m256i w = _mm256_mask_i32gather_epi32(
          _mm256_setzero_si256(), reinterpret_cast<const int*>(src + 2 + 4 * g), rows, m, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 + 32 * g), w);
    }
  }
}

template <int T, int R>
void qgemm_avx2(const QGemmRows& a, const uint8_t* panel, float* c, int64_t ldc, int64_t cols,
                float alpha, float beta) {
  using qgemm_avx2_detail::bcast4;
  const int64_t blocks = a.blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kQGemmAvx2BlockBytes[T];
    const int8_t* q = a.qs + b * kQBlock;
    __m256i s[R];
    if constexpr (T == 0) {
      for (int r = 0; r < R; ++r) s[r] = _mm256_set1_epi32(a.start[r * blocks + b]);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * g));
        const __m256i aw = _mm256_sign_epi8(w, w);
        for (int r = 0; r < R; ++r) {
          const __m256i x = _mm256_sign_epi8(bcast4(q + r * a.ld + 4 * g), w);
          s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), ones));
        }
      }
    } else {
      const __m256i nib = _mm256_set1_epi8(15);
      __m256i h[R];
      for (int r = 0; r < R; ++r) h[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * g));
        const __m256i lo = _mm256_and_si256(raw, nib);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
        for (int r = 0; r < R; ++r) {
          h[r] = _mm256_add_epi16(h[r], _mm256_maddubs_epi16(lo, bcast4(q + r * a.ld + 4 * g)));
          h[r] =
              _mm256_add_epi16(h[r], _mm256_maddubs_epi16(hi, bcast4(q + r * a.ld + 16 + 4 * g)));
        }
      }
      for (int r = 0; r < R; ++r)
        s[r] = _mm256_add_epi32(_mm256_madd_epi16(h[r], ones),
                                _mm256_set1_epi32(a.start[r * blocks + b]));
    }
    const __m256 dk = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]),
                               _mm256_mul_ps(dk, _mm256_set1_ps(a.d[r * blocks + b])), acc[r]);
  }
  const __m256i m = qgemm_avx2_detail::lanes_below(cols);
  const __m256 va = _mm256_set1_ps(alpha);
  for (int r = 0; r < R; ++r) {
    __m256 out = _mm256_mul_ps(va, acc[r]);
    if (beta != 0.0f)
      out = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(c + r * ldc, m), out);
    _mm256_maskstore_ps(c + r * ldc, m, out);
  }
}

template <int... R>
void fill_qgemm_avx2(QuantKernels& k, std::integer_sequence<int, R...>) {
#if !defined(TESSERA_NO_QUANTIZED)
  k.gemm_mr = kQGemmAvx2Mr, k.gemm_nr = kQGemmAvx2Nr;
  for (int t = 0; t < 2; ++t) k.gemm_block_bytes[t] = kQGemmAvx2BlockBytes[t];
  k.gemm_offset[0] = 0, k.gemm_offset[1] = 8;  // signed q8_0 as stored; n = q + 8
  k.gemm_name = "pmaddubsw";
  ((k.gemm[0][R + 1] = &qgemm_avx2<0, R + 1>), ...);
  ((k.gemm[1][R + 1] = &qgemm_avx2<1, R + 1>), ...);
  k.gemm_pack[0] = &qgemm_pack_avx2<0>;
  k.gemm_pack[1] = &qgemm_pack_avx2<1>;
#else
  (void)k;
#endif
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
