// p 2^n with exp's flush to zero, by AVX-512's vscalefps: one instruction in place of the
// float-to-int conversion, shift, integer add and select (4 of the 15 operations of an exp on
// the softmax path). vscalefps also gets n = 128 and overflow right by itself. Other ISAs have
// no such instruction: the integer exponent add (arch/common/exp.hpp).
#pragma once

#include "../common/kernel_ns.hpp"

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <type_traits>

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace x86 {

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

// 2^t for any t, AVX-512: t = floor(t) + f with f = t - floor(t) in [0, 1) by vreduceps (exact;
// 0 for t = +-inf), 2^f by a polynomial, and 2^floor(t) applied by vscalefps, which also
// overflows to +inf, underflows to subnormals and 0, and takes t = -inf to exactly 0 and NaN
// through. No range reduction by ln 2 and no overflow selects: 3 operations and the polynomial.
// Polynomials: minimax fits of 2^f on [0, 1] for the relative error (Remez exchange), Horner.
// Degree 6: 1.86e-9 (c0 rounds to exactly 1, so 2^0 = 1). Degree 5: 7.5e-8 (~1 ulp; c0 is 1 -
// 2^-24), for sums whose terms need no more (logsumexp).
// Coefficients from the highest degree down.
inline constexpr float kExp2Degree6[] = {2.1702256345e-4f,
                                         1.2439687271e-3f,
                                         9.6788406372e-3f,
                                         5.5483341217e-2f,
                                         2.4022983015e-1f,
                                         6.9314700365e-1f,
                                         1.0f};
inline constexpr float kExp2Degree5[] = {1.8775766948e-3f, 8.9893396944e-3f, 5.5826317519e-2f,
                                         2.4015361071e-1f, 6.9315308332e-1f, 9.9999994040e-1f};

template <class Arch, int Degree = 6>
inline xsimd::batch<float, Arch> exp2_reduce(xsimd::batch<float, Arch> t) {
  static_assert(kHasScalef<Arch> && (Degree == 5 || Degree == 6));
  const auto& c = Degree == 6 ? kExp2Degree6 : kExp2Degree5;
  const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 p = _mm512_set1_ps(c[0]);
  for (int i = 1; i <= Degree; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c[i]));
  return _mm512_scalef_ps(p, t);
}

}  // namespace x86
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
