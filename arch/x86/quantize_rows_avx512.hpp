// Rows rounded to q8_0 (QuantKernels::quantize_rows) on AVX-512, by intrinsics: xsimd 8.1 has no
// saturating int32 -> int8 narrowing (vpmovsdb). The same bits as quant_detail::q8_0_block
// (tessera_convert's rounding): the largest |x| by its bits (a NaN or infinity the largest),
// d = amax / 127, each value times 1 / d clamped to +-127 by its bits (a NaN to 0) and rounded
// half away from zero; a non-finite block all zeros with a NaN scale. The generic loop spent
// about 160 cycles a block, a tenth of a 512-row integer GEMM.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../common/convert.hpp"
#include "../common/quant.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace quant512 {

// 16 values times id, rounded as q8_0_block rounds them, narrowed to int8.
inline __m128i round_q8(__m512 x, __m512 id) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  const __m512i b = _mm512_castps_si512(_mm512_mul_ps(x, id));
  const __m512i a = _mm512_and_si512(b, abs);
  const __mmask16 big = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x42fe0000));  // > 127
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  __m512i cb = _mm512_mask_or_epi32(b, big, _mm512_andnot_si512(abs, b),
                                    _mm512_set1_epi32(0x42fe0000));  // +-127
  cb = _mm512_maskz_mov_epi32(__mmask16(~nan), cb);
  const __m512 c = _mm512_castsi512_ps(cb);
  const __m512i t = _mm512_cvttps_epi32(c);
  const __m512 f = _mm512_sub_ps(c, _mm512_cvtepi32_ps(t));
  const __mmask16 half = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  // away from zero: +1, or -1 where the sign bit is set
  const __m512i step = _mm512_or_si512(_mm512_srai_epi32(cb, 31), _mm512_set1_epi32(1));
  return _mm512_cvtsepi32_epi8(_mm512_mask_add_epi32(t, half, t, step));
}

}  // namespace quant512

inline void quantize_q8_rows_avx512(int64_t rows, int64_t d, const float* x, int64_t ldx,
                                    int8_t* qs, float* scales) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  const int64_t blocks = d / kQBlock;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * ldx + b * kQBlock;
      int8_t* q = qs + r * d + b * kQBlock;
      const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
      const uint32_t top =
          _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), abs),
                                                   _mm512_and_si512(_mm512_castps_si512(x1), abs)));
      if (top >= 0x7f800000u) {  // (tessera.h: every q 0, the scale a NaN)
        std::memset(q, 0, kQBlock);
        scales[r * blocks + b] = convert_detail::f16_to_f32(0x7E00);
        continue;
      }
      float amax;
      std::memcpy(&amax, &top, 4);
      const float dd = amax / 127.0f;
      const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
      scales[r * blocks + b] = convert_detail::f16_to_f32(convert_detail::f32_to_f16(dd));
      const __m512 vid = _mm512_set1_ps(id);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), quant512::round_q8(x0, vid));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), quant512::round_q8(x1, vid));
    }
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
