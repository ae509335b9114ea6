// f16 lanes for arch/common/convert.hpp: F16C (8 floats) and AVX-512F (16). xsimd 8.1 has no
// half-precision type, so these are the Intel intrinsics.
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>

#include <cstdint>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

#if defined(__F16C__)
struct F16cLanes {
  static constexpr int64_t kWidth = 8;
  static void to_f16(const float* x, uint16_t* y) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), h);
  }
  static void from_f16(const uint16_t* x, float* y) {
    _mm256_storeu_ps(y, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))));
  }
};
#endif

#if defined(__AVX512F__)
struct Avx512HalfLanes {
  static constexpr int64_t kWidth = 16;
  static void to_f16(const float* x, uint16_t* y) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), h);
  }
  static void from_f16(const uint16_t* x, float* y) {
    _mm512_storeu_ps(y, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
  }
};
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
