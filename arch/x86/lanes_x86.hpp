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

// The two last folds at each width, as overloads: lanes l and l ^ 2 (64-bit pairs), then l and
// l ^ 1 (32-bit pairs), each leaving a's sums in the low lanes of each 128-bit lane and b's in
// the high ones.
#define TESSERA_LANES_PAIRS(R, D, ps)                                             \
  inline __attribute__((always_inline)) R pairs64(R a, R b) {                     \
    const D x = ps##_castps_pd(a), y = ps##_castps_pd(b);                         \
    return ps##_add_ps(ps##_castpd_ps(ps##_unpacklo_pd(x, y)),                    \
                       ps##_castpd_ps(ps##_unpackhi_pd(x, y)));                   \
  }                                                                               \
  inline __attribute__((always_inline)) R pairs32(R a, R b) {                     \
    return ps##_add_ps(ps##_shuffle_ps(a, b, 0x88), ps##_shuffle_ps(a, b, 0xDD)); \
  }
TESSERA_LANES_PAIRS(__m128, __m128d, _mm)
#if defined(__AVX__)
TESSERA_LANES_PAIRS(__m256, __m256d, _mm256)
#endif
#if defined(__AVX512F__)
TESSERA_LANES_PAIRS(__m512, __m512d, _mm512)
#endif
#undef TESSERA_LANES_PAIRS

// Four vectors, already folded down to 128-bit lanes, to one.
template <class R>
inline __attribute__((always_inline)) R last_folds(const R* x) {
  return pairs32(pairs64(x[0], x[2]), pairs64(x[1], x[3]));
}

#if defined(__AVX512F__)
inline __attribute__((always_inline)) __m512 transpose_sum_isa(const __m512* v) {
  constexpr int kOut[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
  __m512 w[8], x[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // 256-bit halves: [a.lo + a.hi, b.lo + b.hi]
    const __m512 a = v[kOut[i]], b = v[kOut[i + 8]];
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i)  // 128-bit quarters of each half
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[i], w[i + 4], 0x88),
                         _mm512_shuffle_f32x4(w[i], w[i + 4], 0xDD));
  return last_folds(x);
}
#endif

#if defined(__AVX__)
inline __attribute__((always_inline)) __m256 transpose_sum_isa(const __m256* v) {
  constexpr int kOut[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  __m256 w[4];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {  // 128-bit halves
    const __m256 a = v[kOut[i]], b = v[kOut[i + 4]];
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  return last_folds(w);
}
#endif

inline __attribute__((always_inline)) __m128 transpose_sum_isa(const __m128* v) {
  const __m128 x[4] = {v[0], v[2], v[1], v[3]};  // the fold order {0, 2, 1, 3}
  return last_folds(x);
}

}  // namespace lanes
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
