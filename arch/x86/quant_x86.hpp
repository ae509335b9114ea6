// The integer lanes of the quantized kernels (arch/common/quant.hpp) on x86, by intrinsics:
// xsimd 8.1 has no byte dot products (pmaddubsw, vpdpbusd) and no sign-of-bytes.
// A block's 32 int8 k and q give int32 lanes of partial dot products (QOps::dot); the sign trick
// |k| . (q signed by k) keeps pmaddubsw's unsigned-by-signed products exact (|k| <= 128,
// |q| <= 127: pair sums within int16).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../common/convert.hpp"

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

// SSE2: no pmaddubsw or pabsb (SSSE3); k and q sign-extended to int16 and multiplied by pmaddwd
// (signed products, so abs and sign are the identity). 4 lanes.
struct QuantSse2 {
  using Pv = QuantSse2;
  static constexpr const char* kDotName = "pmaddwd";
  // A block's f16 scale: SSE2 has no F16C, the portable widening.
  static float scale(const uint8_t* block) {
    uint16_t h;
    std::memcpy(&h, block, 2);
    return convert_detail::f16_to_f32(h);
  }
  static constexpr int kLanes = 4, kPvCols = 8;
  using F = __m128;
  struct B32 {
    __m128i lo, hi;
  };
  static __m128i nibbles(__m128i b, int shift) {
    const __m128i n = _mm_and_si128(_mm_srli_epi16(b, shift), _mm_set1_epi8(15));
    return _mm_sub_epi8(n, _mm_set1_epi8(8));
  }
  template <int T>
  static B32 load_k(const uint8_t* p) {
    if constexpr (T == 0) {
      return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))};
    } else {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return {nibbles(b, 0), nibbles(b, 4)};
    }
  }
  static B32 load_q(const int8_t* p) { return load_k<0>(reinterpret_cast<const uint8_t*>(p)); }
  static B32 abs(B32 k) { return k; }
  static B32 sign(B32 q, B32) { return q; }
  static __m128i lo16(__m128i x) { return _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8); }
  static __m128i hi16(__m128i x) { return _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8); }
  static __m128i dot(B32 k, B32 q) {
    const __m128i a = _mm_add_epi32(_mm_madd_epi16(lo16(k.lo), lo16(q.lo)),
                                    _mm_madd_epi16(hi16(k.lo), hi16(q.lo)));
    const __m128i b = _mm_add_epi32(_mm_madd_epi16(lo16(k.hi), lo16(q.hi)),
                                    _mm_madd_epi16(hi16(k.hi), hi16(q.hi)));
    return _mm_add_epi32(a, b);
  }
  static F cvt(__m128i x) { return _mm_cvtepi32_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static F set1(float x) { return _mm_set1_ps(x); }
  static F zero() { return _mm_setzero_ps(); }
  static float hsum(F v) {
    const F s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
  }
  static F load_f(const float* p) { return _mm_loadu_ps(p); }
  static void store_f(float* p, F v) { _mm_storeu_ps(p, v); }
  // Columns [c0, c0 + 4 C) of a block's values as floats (the integers, unscaled).
  template <int T, int C>
  static void load_v(const uint8_t* qs, int c0, F* out) {
    static_assert(C == 2, "8 columns a chunk");
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + (T == 0 ? c0 : c0 % 16)));
    if constexpr (T == 1) b = nibbles(b, c0 >= 16 ? 4 : 0);
    const __m128i w = lo16(b);
    out[0] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(w, w), 16));
    out[1] = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(w, w), 16));
  }
  template <int T>
  static void dequant_block(const uint8_t* qs, float d, float* y) {
    const F dv = _mm_set1_ps(d);
    for (int c0 = 0; c0 < 32; c0 += 8) {
      F x[2];
      load_v<T, 2>(qs, c0, x);
      _mm_storeu_ps(y + c0, _mm_mul_ps(x[0], dv));
      _mm_storeu_ps(y + c0 + 4, _mm_mul_ps(x[1], dv));
    }
  }
};

#if defined(__AVX2__)
// AVX2 (and AVX-512 without VNNI, on ymm): |k| . sign(q, k) by pmaddubsw, pairs to int32 by
// pmaddwd. 8 lanes.
struct QuantAvx2 {
  using Pv = QuantAvx2;
  static constexpr const char* kDotName = "pmaddubsw";
  static float scale(const uint8_t* block) {  // F16C
    uint16_t h;
    std::memcpy(&h, block, 2);
    return _cvtsh_ss(h);
  }
  static constexpr int kLanes = 8, kPvCols = 16;
  using F = __m256;
  static __m256i nibbles(__m128i b) {
    const __m256i n = _mm256_and_si256(
        _mm256_insertf128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1),
        _mm256_set1_epi8(15));
    return _mm256_sub_epi8(n, _mm256_set1_epi8(8));
  }
  template <int T>
  static __m256i load_k(const uint8_t* p) {
    if constexpr (T == 0)
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    else
      return nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m256i load_q(const int8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static __m256i abs(__m256i k) { return _mm256_sign_epi8(k, k); }
  static __m256i sign(__m256i q, __m256i k) { return _mm256_sign_epi8(q, k); }
  static __m256i dot(__m256i ak, __m256i sq) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ak, sq), _mm256_set1_epi16(1));
  }
  static F cvt(__m256i x) { return _mm256_cvtepi32_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
  }
  static F load_f(const float* p) { return _mm256_loadu_ps(p); }
  static void store_f(float* p, F v) { _mm256_storeu_ps(p, v); }
  template <int T, int C>
  static void load_v(const uint8_t* qs, int c0, F* out) {
    static_assert(C == 2, "16 columns a chunk");
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + (T == 0 ? c0 : 0)));
    if constexpr (T == 1)
      b = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, c0 >= 16 ? 4 : 0), _mm_set1_epi8(15)),
                       _mm_set1_epi8(8));
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(b, b)));
  }
  template <int T>
  static void dequant_block(const uint8_t* qs, float d, float* y) {
    const F dv = _mm256_set1_ps(d);
    for (int c0 = 0; c0 < 32; c0 += 16) {
      F x[2];
      load_v<T, 2>(qs, c0, x);
      _mm256_storeu_ps(y + c0, _mm256_mul_ps(x[0], dv));
      _mm256_storeu_ps(y + c0 + 8, _mm256_mul_ps(x[1], dv));
    }
  }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
// P V on zmm: a whole block's 32 columns in two vectors (the dot kernels stay on ymm, a block
// each).
struct PvAvx512 {
  static constexpr int kLanes = 16, kPvCols = 32;
  static constexpr int kPdCopies = 2;  // quant_pv: each FMA its own {1to16} operand
  using F = __m512;
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F load_f(const float* p) { return _mm512_loadu_ps(p); }
  static void store_f(float* p, F v) { _mm512_storeu_ps(p, v); }
  template <int T, int C>
  static void load_v(const uint8_t* qs, int, F* out) {
    static_assert(C == 2, "a block a chunk");
    __m128i lo, hi;
    if constexpr (T == 0) {
      lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16));
    } else {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      const __m128i m = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
      lo = _mm_sub_epi8(_mm_and_si128(b, m), eight);
      hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), eight);
    }
    out[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    out[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
};

// AVX-512 without VNNI: the AVX2 dot on ymm, P V on zmm.
struct QuantAvx512 : QuantAvx2 {
  using Pv = PvAvx512;
};
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
// AVX512-VNNI on ymm: the block's |k| . sign(q, k) in one vpdpbusd (unsigned by signed bytes,
// four products to each int32 lane, exact).
struct QuantAvx512Vnni : QuantAvx512 {
  // (hides the base's name on purpose: the kernels read QOps::kDotName of the derived set)
  // cppcheck-suppress duplInheritedMember
  static constexpr const char* kDotName = "vpdpbusd";
  static __m256i dot(__m256i ak, __m256i sq) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ak, sq);
  }
};
#endif

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
