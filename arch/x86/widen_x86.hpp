// 16-bit floats widened in registers for gemm_dot_b16.hpp: f16 by F16C / AVX-512 vcvtph2ps, bf16
// by a zero-extension and a shift. xsimd 8.1 has no 16-bit float type: Intel intrinsics.
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__F16C__) && defined(__AVX2__)
struct Avx2F16Widen {
  using B = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static B load(const uint16_t* p) {
    return B(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static float scalar(uint16_t h) { return convert_detail::f16_to_f32(h); }
};
struct Avx2Bf16Widen {
  using B = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static B load(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return B(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  static float scalar(uint16_t h) { return convert_detail::from_bits(uint32_t(h) << 16); }
};
#endif

#if defined(__AVX512F__)
struct Avx512F16Widen {
  using B = xsimd::batch<float, xsimd::avx512f>;
  static B load(const uint16_t* p) {
    return B(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static float scalar(uint16_t h) { return convert_detail::f16_to_f32(h); }
};
struct Avx512Bf16Widen {
  using B = xsimd::batch<float, xsimd::avx512f>;
  static B load(const uint16_t* p) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return B(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  static float scalar(uint16_t h) { return convert_detail::from_bits(uint32_t(h) << 16); }
};
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
