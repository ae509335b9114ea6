// Lane permutations and reductions across the lanes of a vector, over the xsimd 8.1 arch
// (compile-time swizzle and select constants).
#pragma once

#include "kernel_ns.hpp"

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include "../x86/lanes_x86.hpp"
#define TESSERA_LANES_ISA 1
#elif defined(__ARM_NEON)
#include "../arm/lanes_neon.hpp"
#define TESSERA_LANES_ISA 1
#else
#define TESSERA_LANES_ISA 0
#endif

namespace tessera::arch {
inline namespace TESSERA_KERNEL_NS {
namespace lanes {

template <class Arch>
constexpr auto kIndices = std::make_index_sequence<xsimd::batch<float, Arch>::size>();

// The lane permutation i -> i xor D.
template <class Arch, uint32_t D, size_t... I>
constexpr auto xor_lanes(std::index_sequence<I...>) {
  return xsimd::batch_constant<xsimd::batch<uint32_t, Arch>, uint32_t(I ^ D)...>{};
}

// True in the lanes whose index has bit D set.
template <class Arch, uint32_t D, size_t... I>
constexpr auto bit_lanes(std::index_sequence<I...>) {
  return xsimd::batch_bool_constant<xsimd::batch<float, Arch>, ((I & D) != 0)...>{};
}

// Reduces over the lanes by a butterfly (log2 W swizzle + op steps, every lane ends with the
// result): a scalar loop over the W lanes is a W-long dependency chain, and xsimd 8.1's hadd
// on AVX-512 is 3 hadds.
template <class Arch, uint32_t D = xsimd::batch<float, Arch>::size / 2, class Op>
inline float reduce(xsimd::batch<float, Arch> v, Op op) {
  if constexpr (D == 0) {
    return v.get(0);
  } else {
    return reduce<Arch, D / 2>(op(v, xsimd::swizzle(v, xor_lanes<Arch, D>(kIndices<Arch>))), op);
  }
}

// Sums of W vectors at once (W = lanes): lane j of the result is the sum of v[j]'s lanes. At
// each level D = W/2 .. 1, v[i] and v[i + D] fold into one vector whose lanes with bit D clear
// carry v[i]'s pair sums (lanes l, l xor D) and the others v[i + D]'s, so after the last level
// lane j holds v[j]'s total: W - 1 folds of two selects, a swizzle and an add (a horizontal sum
// per vector costs log2 W swizzles and adds for one result). xsimd 8.1's own haddp swaps lanes
// 2-3 with 4-5 and 10-11 with 12-13 on AVX-512, hence this.
template <class Arch, uint32_t D = xsimd::batch<float, Arch>::size / 2>
inline __attribute__((always_inline)) xsimd::batch<float, Arch> transpose_sum_tree(
    xsimd::batch<float, Arch>* v) {
  if constexpr (D == 0) {
    return v[0];
  } else {
    // The lane mask as a run-time batch_bool: xsimd 8.1 has no AVX-512 float select on a
    // batch_bool_constant, and its generic fallback was left out of line by GCC (a call per fold,
    // with every live zmm register saved around it: 6% of the 1 x 4096 x 128 product).
    const xsimd::batch_bool<float, Arch> hi = bit_lanes<Arch, D>(kIndices<Arch>);
    constexpr auto swap = xor_lanes<Arch, D>(kIndices<Arch>);
    for (uint32_t i = 0; i < D; ++i) {
      const auto a = v[i], b = v[i + D];
      v[i] = xsimd::select(hi, b, a) + xsimd::swizzle(xsimd::select(hi, a, b), swap);
    }
    return transpose_sum_tree<Arch, D / 2>(v);
  }
}

// transpose_sum: the ISA's own folds, by register (arch/x86/lanes_x86.hpp,
// arch/arm/lanes_neon.hpp: the same sums in fewer operations), else the portable tree.
template <class Arch>
inline __attribute__((always_inline)) xsimd::batch<float, Arch> transpose_sum(
    xsimd::batch<float, Arch>* v) {
  using B = xsimd::batch<float, Arch>;
#if TESSERA_LANES_ISA
  typename B::register_type r[B::size];
  // Unrolled by pragma (here and in the ISA forms): a rolled copy kept the caller's accumulators
  // in memory, and gemm_dot_nt_row on AArch64 stored them every k step.
#pragma GCC unroll 16
  for (size_t i = 0; i < B::size; ++i) r[i] = v[i];
  return B(transpose_sum_isa(r));
#else
  return transpose_sum_tree<Arch>(v);
#endif
}

}  // namespace lanes
}  // namespace TESSERA_KERNEL_NS
}  // namespace tessera::arch
