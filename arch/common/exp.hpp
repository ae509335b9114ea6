// Vectorized exp and tanh, written once over the xsimd arch.
//
// exp(x) = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2]:
//  - Cody-Waite reduction: ln 2 = kLn2Hi + kLn2Lo, where kLn2Hi has 9 significant bits, so
//    n * kLn2Hi is exact for |n| <= 2^15 and r carries no cancellation error beyond kLn2Lo's;
//  - e^r by a degree-6 minimax polynomial (Horner, FMA);
//  - 2^n applied by an integer add to p's exponent field; for n = 128 (x up to 88.72) 2^n is
//    not a float, so the result is formed as (p 2^127) 2. On AVX-512 vscalefps does both, and
//    the overflow to +inf.
// Range: x > 88.7228394 (= log(FLT_MAX)) gives +inf; x <= -87.3365448 (= log(FLT_MIN)) gives
// exactly 0 (results there would be subnormal); NaN gives NaN. No clamp and no NaN test (see
// the body). Measured error: see the ULP table in tests/transcendental_test.cpp (<= 2 ulp
// against correctly rounded exp).
//
// tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)) for |x| >= 0.625, where the subtraction loses
// at most one bit; below, an odd polynomial x + x^3 P(x^2) avoids that cancellation.
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "fmadd.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/pow2_x86.hpp"
#endif

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

namespace exp_detail {

constexpr float kMaxX = 88.7228394f;
// The float nearest log(FLT_MIN) lies just below it: exp there is subnormal, so that point
// belongs to the flushed side (x <= kMinX gives 0).
constexpr float kMinX = -87.3365448f;

template <class Arch>
struct ExpParts {
  xsimd::batch<float, Arch> p;  // e^r, in [0.707, 1.415]
  xsimd::batch<float, Arch> n;  // n = round(x log2 e), exp(x) = p 2^n
};

// Range reduction and the polynomial, valid for |x| < 2^22 ln 2 (garbage beyond, which the
// callers' selects replace; NaN stays NaN).
template <class Arch>
inline ExpParts<Arch> exp_core(xsimd::batch<float, Arch> x) {
  using B = xsimd::batch<float, Arch>;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Adding 1.5 2^23 rounds x log2 e to an integer held in the sum's low mantissa bits.
  constexpr float kMagic = 12582912.0f;

  const B n = fmadd(x, B(kLog2e), B(kMagic)) - B(kMagic);
  // x - n ln2_hi (exact), then - n ln2_lo; negated constants rather than fnma, which xsimd
  // 8.1 builds on AVX-512 as a negation and an fma.
  B r = fmadd(n, B(-kLn2Hi), x);
  r = fmadd(n, B(-kLn2Lo), r);
  // Degree 6, c0 = c1 = 1 fixed (so exp(0) = 1 exactly and results just below 1 keep their last
  // bit), c2..c6 minimax for the relative error on [-ln2/2, ln2/2] by a Remez exchange: 1.9e-9,
  // 1.05 ulp after float rounding (exhaustive over [kMinX, 88.3]). Pure Horner: 6 FMAs.
  B p = B(1.3836845756e-3f);
  p = fmadd(p, r, B(8.3748158067e-3f));
  p = fmadd(p, r, B(4.1668225080e-2f));
  p = fmadd(p, r, B(1.6666419804e-1f));
  p = fmadd(p, r, B(4.9999991059e-1f));
  p = fmadd(p, r, B(1.0f));
  p = fmadd(p, r, B(1.0f));
  return {p, n};
}

// p 2^n by adding n to p's exponent field: exact while the result is a normal float (p in
// [0.707, 1.415], -126 <= n <= 127). n is the float-to-int conversion of the float n rather
// than the magic sum's bits so that NaN (converted to 0 on ARM, INT_MIN on x86: both 0 after
// the shift) keeps p's bits, payload and all.
template <class Arch>
inline xsimd::batch<float, Arch> scale_pow2(xsimd::batch<float, Arch> p,
                                            xsimd::batch<int32_t, Arch> n) {
  using I = xsimd::batch<int32_t, Arch>;
  return xsimd::bitwise_cast<xsimd::batch<float, Arch>>(xsimd::bitwise_cast<I>(p) + (n << 23));
}

// p 2^n (n integral), 0 where x <= lo, NaN x kept: by vscalefps where the ISA has it.
template <class Arch>
inline xsimd::batch<float, Arch> pow2_above(xsimd::batch<float, Arch> p,
                                            xsimd::batch<float, Arch> n,
                                            xsimd::batch<float, Arch> x, float lo) {
  using B = xsimd::batch<float, Arch>;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  if constexpr (x86::kHasScalef<Arch>) return x86::scalef_above<Arch>(p, n, x, lo);
#endif
  return xsimd::select(x <= B(lo), B(0.0f), scale_pow2<Arch>(p, xsimd::to_int(n)));
}

}  // namespace exp_detail

template <class Arch>
inline xsimd::batch<float, Arch> exp_vec(xsimd::batch<float, Arch> x) {
  using B = xsimd::batch<float, Arch>;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  if constexpr (x86::kHasScalef<Arch>) {
    // vscalefps overflows p 2^n to +inf and takes n = 128 by itself; the arguments are capped
    // at 89 (NaN kept) so that +inf, whose reduction would give NaN, overflows like any x above
    // kMaxX. 13 operations against 21 for the integer path below: 4096 exps in L1, 1 thread,
    // 3.6 -> 4.4-4.9 G/s (libmvec's and xsimd's AVX-512 expf: 3.7-3.8 in the same run).
    const exp_detail::ExpParts<Arch> e =
        exp_detail::exp_core<Arch>(x86::min_keep_nan<Arch>(89.0f, x));
    return exp_detail::pow2_above<Arch>(e.p, e.n, x, exp_detail::kMinX);
  }
#endif
  // No clamp: lanes outside (kMinX, kMaxX] compute garbage (or NaN) and are replaced by the
  // selects at the end; NaN input flows through the arithmetic and no select matches it.
  const exp_detail::ExpParts<Arch> e = exp_detail::exp_core<Arch>(x);
  // n = 128 (x in (88.38, 88.72]) is not a float power of 2: p 2^127 doubled (exact: doubling
  // only moves the exponent).
  // (The cap in integers: a float min would turn NaN into 127 on x86.)
  using I = xsimd::batch<int32_t, Arch>;
  B y = exp_detail::scale_pow2<Arch>(e.p, xsimd::min(xsimd::to_int(e.n), I(127)));
  y = xsimd::select(e.n > B(127.0f), y + y, y);
  y = xsimd::select(x > B(exp_detail::kMaxX), B(std::numeric_limits<float>::infinity()), y);
  return xsimd::select(x <= B(exp_detail::kMinX), B(0.0f), y);
}

// exp for arguments that cannot exceed ~0 (x - max in softmax and attention): no overflow
// handling, 6 operations fewer than exp_vec (15 in all; on AVX-512, with vscalefps, 12 against
// 13), the same results wherever both apply.
template <class Arch>
inline xsimd::batch<float, Arch> exp_vec_nonpositive(xsimd::batch<float, Arch> x) {
  const exp_detail::ExpParts<Arch> e = exp_detail::exp_core<Arch>(x);
  return exp_detail::pow2_above<Arch>(e.p, e.n, x, exp_detail::kMinX);
}

// exp(scale x - shift) for many x at one (scale, shift): the exps of softmax, logsumexp and
// fused attention, whose arguments are <= ~0 (shift is the max, or attention's running max
// up to kRescaleSlack below it). shift may differ per lane; it must be finite.
// On AVX-512 in base 2: u = scale x - shift (one FMA, as the natural form), t = u log2 e, then
// 2^t by x86::exp2_reduce: 10 operations against 13 for exp_vec_nonpositive after the FMA (4096
// exps in L1, 1 thread: 5.9 -> 8.4 G/s with the shift folded, below). The error is that of
// u's rounding (|u| 2^-24 relative, as in the natural form), t's (the same again) and log2 e's
// (half that): 2.5 |u| 2^-24 plus exp2_reduce's, all small near the max whatever the shift.
// kFoldShift: t = x (scale log2 e) - shift log2 e in one FMA, one operation fewer; the rounding
// of shift log2 e then makes an error of |shift| 2^-24 common to every exp taken against that
// shift, wrong wherever exps against different shifts are combined (a long softmax row's
// chunks, attention's tiles: 1.4e-6 relative in a 70001-column softmax row), harmless for a
// logsumexp (it moves lse by 2^-24 of the shift, ~ of lse itself).
// Degree: x86::exp2_reduce's polynomial on AVX-512 (5 for sums that need no more than ~1 ulp
// per term, see there). Other ISAs ignore both: the natural form.
template <class Arch, int Degree = 6, bool kFoldShift = false>
struct ShiftedExp {
  using B = xsimd::batch<float, Arch>;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  static constexpr bool kBase2 = x86::kHasScalef<Arch>;
#else
  static constexpr bool kBase2 = false;
#endif
  static constexpr bool kFold = kBase2 && kFoldShift;
  static constexpr float kLog2e = 1.44269504088896341f;
  B mul;

  explicit ShiftedExp(float scale) : mul(kFold ? scale * kLog2e : scale) {}

  // The additive term that stands for a shift (per lane).
  B offset(B shift) const { return kFold ? -(shift * B(kLog2e)) : -shift; }

  // exp(scale x - shift), offset = offset(shift).
  B operator()(B x, B offset) const {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
    if constexpr (kFold) return x86::exp2_reduce<Arch, Degree>(fmadd(x, mul, offset));
    if constexpr (kBase2) return x86::exp2_reduce<Arch, Degree>(fmadd(x, mul, offset) * B(kLog2e));
#endif
    return exp_vec_nonpositive<Arch>(fmadd(x, mul, offset));
  }
};

template <class Arch>
inline xsimd::batch<float, Arch> tanh_vec(xsimd::batch<float, Arch> x) {
  using B = xsimd::batch<float, Arch>;
  const B ax = xsimd::abs(x);
  // Large: 1 - 2 / (e^{2|x|} + 1). From |x| = 9.02 on the result rounds to 1: clamping at 10 keeps
  // exp on its fast in-range path.
  const B a9 = xsimd::min(ax, B(10.0f));
  const B big = B(1.0f) - B(2.0f) / (exp_vec<Arch>(a9 + a9) + B(1.0f));
  // Small: odd polynomial in x.
  const B z = x * x;
  B q = B(-5.70498872745e-3f);
  q = fmadd(q, z, B(2.06390887954e-2f));
  q = fmadd(q, z, B(-5.37397155531e-2f));
  q = fmadd(q, z, B(1.33314422036e-1f));
  q = fmadd(q, z, B(-3.33332819422e-1f));
  const B small = fmadd(q * z, ax, ax);
  // tanh is odd: computed on |x|, signed last (also keeps tanh(-0) = -0).
  const B y = xsimd::copysign(xsimd::select(ax < B(0.625f), small, big), x);
  return xsimd::select(xsimd::isnan(x), x, y);
}

// Array forms, for the tests' ULP tables, the benchmarks and the layers (tanh).
template <class Arch, class F>
void map_array(int64_t n, const float* x, float* y, F f) {
  using B = xsimd::batch<float, Arch>;
  constexpr int64_t W = B::size;
  int64_t i = 0;
  for (; i + W <= n; i += W) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {  // the tail through one padded vector, so every element takes the same path
    alignas(64) float buf[W] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    f(B::load_aligned(buf)).store_aligned(buf);
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}

template <class Arch>
void exp_array(int64_t n, const float* x, float* y) {
  map_array<Arch>(n, x, y, [](xsimd::batch<float, Arch> v) { return exp_vec<Arch>(v); });
}

template <class Arch>
void exp_nonpositive_array(int64_t n, const float* x, float* y) {
  map_array<Arch>(n, x, y,
                  [](xsimd::batch<float, Arch> v) { return exp_vec_nonpositive<Arch>(v); });
}

template <class Arch>
void exp_shifted_array(int64_t n, const float* x, float scale, float shift, float* y) {
  using B = xsimd::batch<float, Arch>;
  const ShiftedExp<Arch> ex(scale);
  const B off = ex.offset(B(shift));
  map_array<Arch>(n, x, y, [&](B v) { return ex(v, off); });
}

template <class Arch>
void tanh_array(int64_t n, const float* x, float* y) {
  map_array<Arch>(n, x, y, [](xsimd::batch<float, Arch> v) { return tanh_vec<Arch>(v); });
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
