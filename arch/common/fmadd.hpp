// a b + c rounded once, on every arch.
//
// xsimd 8.1 has no AVX-512 fma: its generic fallback is a * b + c, which GCC contracts into
// vfmadd in optimised builds (-ffp-contract=fast, the GNU default) but not in the sanitizer
// build, whose results then differed from the release build's (an exp argument rounded twice
// broke the shifted exp's error bound there). AVX-512 gets the intrinsic; every other arch
// xsimd's fma (fused on fma3<avx2> and NEON; SSE2 has no fused form and rounds twice).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <type_traits>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {

template <class Arch>
inline xsimd::batch<float, Arch> fmadd(xsimd::batch<float, Arch> a, xsimd::batch<float, Arch> b,
                                       xsimd::batch<float, Arch> c) {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch>) return _mm512_fmadd_ps(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
