// A 16 x 16 register transpose for packing columns into panels on AVX-512 (B^T, K^T in fused
// attention, A not transposed). Only instantiated in the translation unit compiled for AVX-512
// (arch/x86/avx512.cpp).
//
// The textbook form loads 16 rows and runs four rounds of 16 two-source shuffles (64 shuffles
// per 256 floats). Here the load unit does the two cross-lane rounds: each register is built
// from four 128-bit pieces of four rows (one broadcast load, three merge-masked broadcast loads,
// whose blends run on any FP pipe), and only the two in-lane rounds remain (32 shuffles).
// Measured on Zen 5 (one 512-bit shuffle per cycle for these), packing a 64 x 64 B^T into
// 32-column panels: 980 -> 650-700 cycles with the source in L1/L2, 1250 -> 860-950 from L3.
#pragma once

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::arch::x86 {

template <class Arch>
constexpr bool kHasTranspose16 = std::is_base_of_v<xsimd::avx512f, Arch>;

// Rows c = 0..C-1 of src (row c at src + c ld, 16 floats each) become the first C floats of
// dst + t pitch, t = 0..15 (dst[t pitch + c] = src[c ld + t]). C < 16 (the 14-row A panels)
// reads no row past C - 1, transposes zeros in their place and stores C lanes under a mask, so
// nothing past a row's C floats is written.
template <class Arch, int C = 16>
inline void transpose_16x16(const float* src, int64_t ld, float* dst, int64_t pitch) {
  static_assert(kHasTranspose16<Arch> && C > 0 && C <= 16);
  // Column quad q (columns 4q .. 4q + 3) at a time. x[r], 128-bit lane L: row 4L + r of the
  // quad. The in-lane 4 x 4 transpose of x[0..3] then leaves, in lane L of y[t], rows
  // 4L .. 4L + 3 of column 4q + t: output row 4q + t, whole.
  for (int q = 0; q < 4; ++q) {
    __m512 x[4];
    for (int r = 0; r < 4; ++r) {
      x[r] =
          r < C ? _mm512_broadcast_f32x4(_mm_loadu_ps(src + r * ld + 4 * q)) : _mm512_setzero_ps();
      for (int L = 1; L < 4; ++L) {
        const int row = 4 * L + r;
        const __mmask16 lane = static_cast<__mmask16>(0xFu << (4 * L));
        x[r] = row < C
                   ? _mm512_mask_broadcast_f32x4(x[r], lane, _mm_loadu_ps(src + row * ld + 4 * q))
                   : _mm512_maskz_mov_ps(static_cast<__mmask16>(~lane), x[r]);
      }
    }
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(x[0], x[1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(x[0], x[1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(x[2], x[3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(x[2], x[3]));
    const __m512 y[4] = {
        _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2)), _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2)),
        _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3)), _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3))};
    for (int t = 0; t < 4; ++t) {
      float* out = dst + (4 * q + t) * pitch;
      if constexpr (C == 16)
        _mm512_storeu_ps(out, y[t]);
      else
        _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << C) - 1), y[t]);
    }
  }
}

}  // namespace tessera::arch::x86
