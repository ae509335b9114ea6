// A 16 x 16 register transpose for packing columns into panels on AVX-512 (B^T, K^T in fused
// attention, A not transposed): 16 loads, four rounds of 16 two-source shuffles, 16 full-width
// stores, 0.375 operations per float. The generic 4-row scheme (arch/common/gemm_pack.hpp) costs
// about twice that and goes through a stack buffer in 16-byte pieces. Only instantiated in the
// translation unit compiled for AVX-512 (arch/x86/avx512.cpp).
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace x86 {

template <class Arch>
constexpr bool kHasTranspose16 = std::is_base_of_v<xsimd::avx512f, Arch>;

// Rows c = 0..C-1 of src (row c at src + c ld, 16 floats each) become the first C floats of
// dst + t pitch, t = 0..15 (dst[t pitch + c] = src[c ld + t]). C < 16 (the 14-row A panels)
// transposes zeros in place of the missing rows and stores C lanes under a mask, so nothing
// past a row's C floats is written.
template <class Arch, int C = 16>
inline void transpose_16x16(const float* src, int64_t ld, float* dst, int64_t pitch) {
  static_assert(kHasTranspose16<Arch> && C > 0 && C <= 16);
  __m512 r[16], s[16];
  for (int i = 0; i < 16; ++i) r[i] = i < C ? _mm512_loadu_ps(src + i * ld) : _mm512_setzero_ps();
  // Round 1: interleave rows pairwise (2i, 2i + 1) within 128-bit lanes.
  for (int i = 0; i < 16; i += 2) {
    s[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    s[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // Round 2: 64-bit pairs, rows i .. i + 3: s[i + h] holds columns 4L + 2h, 4L + 2h + 1 of rows
  // i, i + 1, s[i + 2 + h] the same of rows i + 2, i + 3.
  for (int i = 0; i < 16; i += 4) {
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(s[i + h]), b = _mm512_castps_pd(s[i + 2 + h]);
      r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  // Now r[4g + j] holds, in 128-bit lane L, column 4L + j of rows 4g .. 4g + 3.
  // Round 3: gather lanes (0, 2) and (1, 3) of row groups g and g + 1.
  for (int g = 0; g < 4; g += 2)
    for (int j = 0; j < 4; ++j) {
      const __m512 a = r[4 * g + j], b = r[4 * (g + 1) + j];
      s[4 * g + j] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      s[4 * (g + 1) + j] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    }
  // Round 4: combine the halves (row groups 0-1 with 2-3).
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < 2; ++h) {
      const __m512 a = s[4 * h + j], b = s[4 * (h + 2) + j];
      r[4 * h + j] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      r[4 * (h + 2) + j] = _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    }
  for (int t = 0; t < 16; ++t) {
    if constexpr (C == 16)
      _mm512_storeu_ps(dst + t * pitch, r[t]);
    else
      _mm512_mask_storeu_ps(dst + t * pitch, static_cast<__mmask16>((1u << C) - 1), r[t]);
  }
}

}  // namespace x86
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
