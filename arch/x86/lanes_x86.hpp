// lanes::transpose_sum on x86: xsimd 8.1 has no two-source shuffle, so its portable fold is two
// selects, a swizzle and an add (SSE2's select alone is three operations); these take two
// shuffles and an add. They fold the same lane pairs in the same order as the portable tree
// (l with l ^ W/2, ..., l with l ^ 1), so every sum is the same bit for bit; the folds leave the
// sums in another lane order, an involution (out[out[l]] = l), so the inputs go in that order
// and the result comes out in lane order: lane j is the sum of v[j]'s lanes.
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace lanes {

#if defined(__AVX512F__)
inline __attribute__((always_inline)) __m512 transpose_sum_isa(const __m512* v) {
  constexpr int kOut[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i) {  // 256-bit halves: [a.lo + a.hi, b.lo + b.hi]
    const __m512 a = v[kOut[i]], b = v[kOut[i + 8]];
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int i = 0; i < 4; ++i)  // 128-bit quarters of each half
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[i], w[i + 4], 0x88),
                         _mm512_shuffle_f32x4(w[i], w[i + 4], 0xDD));
  for (int i = 0; i < 2; ++i) {  // 64-bit pairs
    const __m512d a = _mm512_castps_pd(x[i]), b = _mm512_castps_pd(x[i + 2]);
    y[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
}
#endif

#if defined(__AVX__)
inline __attribute__((always_inline)) __m256 transpose_sum_isa(const __m256* v) {
  constexpr int kOut[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  __m256 w[4], x[2];
  for (int i = 0; i < 4; ++i) {  // 128-bit halves
    const __m256 a = v[kOut[i]], b = v[kOut[i + 4]];
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  for (int i = 0; i < 2; ++i) {  // 64-bit pairs
    const __m256d a = _mm256_castps_pd(w[i]), b = _mm256_castps_pd(w[i + 2]);
    x[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  return _mm256_add_ps(_mm256_shuffle_ps(x[0], x[1], 0x88), _mm256_shuffle_ps(x[0], x[1], 0xDD));
}
#endif

inline __attribute__((always_inline)) __m128 transpose_sum_isa(const __m128* v) {
  constexpr int kOut[4] = {0, 2, 1, 3};
  __m128 w[2];
  for (int i = 0; i < 2; ++i) {  // 64-bit pairs
    const __m128d a = _mm_castps_pd(v[kOut[i]]), b = _mm_castps_pd(v[kOut[i + 2]]);
    w[i] = _mm_add_ps(_mm_castpd_ps(_mm_unpacklo_pd(a, b)), _mm_castpd_ps(_mm_unpackhi_pd(a, b)));
  }
  return _mm_add_ps(_mm_shuffle_ps(w[0], w[1], 0x88), _mm_shuffle_ps(w[0], w[1], 0xDD));
}

}  // namespace lanes
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
