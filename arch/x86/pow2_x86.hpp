// p 2^n with exp's flush to zero, by AVX-512's vscalefps: one instruction in place of the
// float-to-int conversion, shift, integer add and select (4 of the 15 operations of an exp on
// the softmax path). vscalefps also gets n = 128 and overflow right by itself. Other ISAs have
// no such instruction: the integer exponent add (arch/common/exp.hpp).
#pragma once

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <type_traits>

namespace tessera::arch::x86 {

template <class Arch>
constexpr bool kHasScalef = std::is_base_of_v<xsimd::avx512f, Arch>;

// p 2^n (n integral), 0 in the lanes where x <= lo; NaN x keeps its lane (the unordered
// compare is true for it), so NaN flows through from p.
template <class Arch>
inline xsimd::batch<float, Arch> scalef_above(xsimd::batch<float, Arch> p,
                                              xsimd::batch<float, Arch> n,
                                              xsimd::batch<float, Arch> x, float lo) {
  static_assert(kHasScalef<Arch>);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(lo), _CMP_NLE_UQ);
  return _mm512_maskz_scalef_ps(keep, p, n);
}

// min(hi, x) with NaN x kept: vminps returns its second operand when either is NaN.
template <class Arch>
inline xsimd::batch<float, Arch> min_keep_nan(float hi, xsimd::batch<float, Arch> x) {
  static_assert(kHasScalef<Arch>);
  return _mm512_min_ps(_mm512_set1_ps(hi), x);
}

}  // namespace tessera::arch::x86
